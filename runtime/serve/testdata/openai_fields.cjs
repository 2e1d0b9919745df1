// Drives strata serve's request fields beyond the basics with the official
// openai npm client (v4): an API key, n with a seed, logprobs and
// top_logprobs (chat, streamed and not), /v1/completions' logprobs,
// ignore_eos, and a wrong key. Arguments: the base URL and the key. Prints
// one JSON object of what the client saw.
const OpenAI = require("openai");

async function main() {
  const [url, key] = process.argv.slice(2);
  const client = new OpenAI({ baseURL: url + "/v1", apiKey: key, maxRetries: 0 });
  const out = {};
  const req = { model: "tiny", messages: [{ role: "user", content: "Hello there" }], max_tokens: 6,
    n: 3, seed: 5, temperature: 0.8, logprobs: true, top_logprobs: 3 };

  const chat = await client.chat.completions.create(req);
  out.chat = chat.choices.map((c) => ({ index: c.index, content: c.message.content, logprobs: c.logprobs.content }));
  out.chatUsage = chat.usage;

  const stream = await client.chat.completions.create({ ...req, stream: true });
  const streamed = [];
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      const s = (streamed[c.index] ||= { index: c.index, content: "", logprobs: [] });
      if (c.delta.content) s.content += c.delta.content;
      if (c.logprobs) s.logprobs.push(...c.logprobs.content);
    }
  }
  out.stream = streamed;

  const cmpl = await client.completions.create({ model: "tiny", prompt: "Hello", max_tokens: 5, logprobs: 2, ignore_eos: true });
  out.completion = { text: cmpl.choices[0].text, logprobs: cmpl.choices[0].logprobs, usage: cmpl.usage };

  const wrong = new OpenAI({ baseURL: url + "/v1", apiKey: "not-the-key", maxRetries: 0 });
  try {
    await wrong.models.list();
    out.wrongKey = "accepted";
  } catch (e) {
    out.wrongKey = { name: e.constructor.name, status: e.status, code: e.code };
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
