// Cases for the official openai npm client (v4). Each tool case returns
// { calls: [{ name, arguments }], finishes: [first, second], answer } (and
// the non-streamed one promptTokens, the two requests' usage.prompt_tokens).
// The conversation is the reference's to the byte (weather.cjs), so the
// server must render it as HF's template did.
const OpenAI = require("openai");
const weather = require("./weather.cjs");

function client(baseURL) {
  return new OpenAI({ baseURL: baseURL + "/v1", apiKey: "none", maxRetries: 0 });
}

const ask = () => [{ role: "system", content: weather.system }, { role: "user", content: weather.question }];

// The reply to the tool call: the call sent back with each tool's result.
function withResults(messages, msg) {
  const results = msg.tool_calls.map((c) => ({ role: "tool", tool_call_id: c.id,
    content: weather.pythonJSON(weather.run(c.function.name, JSON.parse(c.function.arguments))) }));
  return [...messages, msg, ...results];
}

const cases = {
  async toolRoundTrip({ baseURL, model }) {
    const api = client(baseURL);
    const messages = ask();
    const first = await api.chat.completions.create({ model, messages, tools: weather.openaiTools, max_tokens: 100 });
    const msg = first.choices[0].message;
    const second = await api.chat.completions.create({ model, messages: withResults(messages, msg),
      tools: weather.openaiTools, max_tokens: 100 });
    return {
      calls: (msg.tool_calls || []).map((c) => ({ name: c.function.name, arguments: c.function.arguments })),
      finishes: [first.choices[0].finish_reason, second.choices[0].finish_reason],
      answer: second.choices[0].message.content,
      promptTokens: [first.usage.prompt_tokens, second.usage.prompt_tokens],
    };
  },

  async toolRoundTripStream({ baseURL, model }) {
    const api = client(baseURL);
    const messages = ask();
    const stream = await api.chat.completions.create({ model, messages, tools: weather.openaiTools, max_tokens: 100,
      stream: true });
    const calls = [];
    let firstFinish = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        for (const d of c.delta.tool_calls || []) {
          calls[d.index] = calls[d.index] || { id: "", type: "function", function: { name: "", arguments: "" } };
          const acc = calls[d.index];
          if (d.id) acc.id = d.id;
          if (d.function && d.function.name) acc.function.name += d.function.name;
          if (d.function && d.function.arguments) acc.function.arguments += d.function.arguments;
        }
        if (c.finish_reason) firstFinish = c.finish_reason;
      }
    }
    const msg = { role: "assistant", content: null, tool_calls: calls };
    const answer = await api.chat.completions.create({ model, messages: withResults(messages, msg),
      tools: weather.openaiTools, max_tokens: 100, stream: true });
    let text = "", finish = null;
    for await (const chunk of answer) {
      for (const c of chunk.choices) {
        if (c.delta.content) text += c.delta.content;
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    return {
      calls: calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments })),
      finishes: [firstFinish, finish],
      answer: text,
    };
  },

  // response_format json_schema: the reply's content is the JSON object.
  async jsonSchema({ baseURL, model }) {
    const r = await client(baseURL).chat.completions.create({ model, max_tokens: 120,
      messages: [{ role: "user", content: weather.reportQuestion }],
      response_format: { type: "json_schema", json_schema: { name: "report", strict: true, schema: weather.reportSchema } } });
    return { content: r.choices[0].message.content, finish: r.choices[0].finish_reason };
  },

  // tool_choice "required" on a question that needs no tool: a call anyway.
  async forcedTool({ baseURL, model }) {
    const r = await client(baseURL).chat.completions.create({ model, max_tokens: 100,
      messages: [{ role: "user", content: weather.smallTalk }], tools: weather.openaiTools, tool_choice: "required" });
    const msg = r.choices[0].message;
    return { calls: (msg.tool_calls || []).map((c) => ({ name: c.function.name, arguments: c.function.arguments })),
      finish: r.choices[0].finish_reason };
  },

  // tool_choice naming a function the question does not need: that call.
  async namedTool({ baseURL, model }) {
    const r = await client(baseURL).chat.completions.create({ model, max_tokens: 100,
      messages: [{ role: "user", content: weather.question }], tools: weather.openaiTools,
      tool_choice: { type: "function", function: { name: "read_file" } } });
    const msg = r.choices[0].message;
    return { calls: (msg.tool_calls || []).map((c) => ({ name: c.function.name, arguments: c.function.arguments })),
      finish: r.choices[0].finish_reason };
  },

  // logprobs with three alternatives, streamed: what the client parsed.
  async logprobs({ baseURL, model }) {
    const stream = await client(baseURL).chat.completions.create({ model, max_tokens: 12, stream: true,
      messages: [{ role: "user", content: weather.smallTalk }], logprobs: true, top_logprobs: 3 });
    let content = "";
    const tokens = [];
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        if (c.delta.content) content += c.delta.content;
        for (const lp of (c.logprobs && c.logprobs.content) || []) {
          tokens.push({ token: lp.token, logprob: lp.logprob, top: lp.top_logprobs.map((t) => ({ token: t.token, logprob: t.logprob })) });
        }
      }
    }
    return { content, tokens };
  },
};

module.exports = { cases };
