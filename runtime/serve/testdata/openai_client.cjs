// Drives strata serve with the official openai npm client (v4). Arguments:
// the real model's base URL, the fake tool-calling model's base URL. Prints
// one JSON object of what the client saw; the Go test checks it.
const OpenAI = require("openai");

async function main() {
  const [realURL, toolURL] = process.argv.slice(2);
  const real = new OpenAI({ baseURL: realURL + "/v1", apiKey: "none", maxRetries: 0 });
  const tool = new OpenAI({ baseURL: toolURL + "/v1", apiKey: "none", maxRetries: 0 });
  const out = {};
  const messages = [{ role: "user", content: "Hello there" }];

  const chat = await real.chat.completions.create({ model: "tiny", messages, max_tokens: 8, temperature: 0 });
  out.chat = { object: chat.object, role: chat.choices[0].message.role, content: chat.choices[0].message.content,
    finish: chat.choices[0].finish_reason, usage: chat.usage };

  const stream = await real.chat.completions.create({ model: "tiny", messages, max_tokens: 8, stream: true,
    stream_options: { include_usage: true } });
  let content = "", finish = null, usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.content) content += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  out.stream = { content, finish, usage };

  const cmpl = await real.completions.create({ model: "tiny", prompt: "Hello", max_tokens: 4 });
  out.completion = { object: cmpl.object, text: cmpl.choices[0].text, usage: cmpl.usage };

  const models = await real.models.list();
  out.models = models.data.map((m) => m.id);

  const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object",
    properties: { city: { type: "string" } } } } }];
  const ask = [{ role: "user", content: "Weather in Paris?" }];
  const call = await tool.chat.completions.create({ model: "fake", messages: ask, tools, max_tokens: 400 });
  const msg = call.choices[0].message;
  out.tool = { finish: call.choices[0].finish_reason, calls: msg.tool_calls, reasoning: msg.reasoning_content,
    content: msg.content };
  // The round trip: the call and its result sent back.
  const back = await tool.chat.completions.create({ model: "fake", max_tokens: 400, tools,
    messages: [...ask, msg, { role: "tool", tool_call_id: msg.tool_calls[0].id, content: "18 C" }] });
  out.roundTrip = back.choices[0].finish_reason;
  const streamed = await tool.chat.completions.create({ model: "fake", messages: ask, tools, max_tokens: 400, stream: true });
  const calls = [];
  for await (const chunk of streamed) {
    for (const c of chunk.choices) for (const t of c.delta.tool_calls || []) calls.push(t);
  }
  out.streamedCalls = calls;

  out.errors = {};
  for (const [name, req] of Object.entries({
    unknownModel: { model: "gpt-4", messages },
    badValue: { model: "tiny", messages, temperature: 5 },
  })) {
    try {
      await real.chat.completions.create(req);
      out.errors[name] = "no error";
    } catch (e) {
      out.errors[name] = { status: e.status, code: e.code, param: e.param, type: e.type };
    }
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
