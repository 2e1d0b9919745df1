// Cases for the Vercel AI SDK (ai v5 with @ai-sdk/openai-compatible and
// zod): generateText and streamText run the round trip themselves (the
// model calls the tool, the SDK executes it and sends the result, the model
// answers). Each tool case returns { calls: [{ name, arguments }],
// finishes: [first step, second step], answer, requests }: requests are the
// bodies the SDK sent (messages, tools), recorded through its fetch hook, so
// the test can work out the model's replies to them itself.
const { generateText, streamText, tool, stepCountIs } = require("ai");
const { createOpenAICompatible } = require("@ai-sdk/openai-compatible");
const { z } = require("zod");
const weather = require("./weather.cjs");

function chatModel(baseURL, model, requests) {
  const record = (url, init) => {
    const body = JSON.parse(init.body);
    requests.push({ messages: body.messages, tools: body.tools });
    return fetch(url, init);
  };
  return createOpenAICompatible({ name: "strata", baseURL: baseURL + "/v1", apiKey: "none", fetch: record })
    .chatModel(model);
}

const tools = Object.fromEntries(weather.tools.map((t) => [t.name, tool({
  description: t.description,
  inputSchema: z.object({ [t.param]: z.string() }),
  execute: async (args) => weather.run(t.name, args),
})]));

const request = (baseURL, model, requests) => ({
  model: chatModel(baseURL, model, requests), system: weather.system, prompt: weather.question, tools,
  stopWhen: stepCountIs(2), maxOutputTokens: 100, temperature: 0, maxRetries: 0,
});

function summary(steps, text, requests) {
  return {
    requests,
    calls: steps.flatMap((s) => s.toolCalls).map((c) => ({ name: c.toolName, arguments: JSON.stringify(c.input) })),
    finishes: steps.map((s) => s.finishReason),
    answer: text,
  };
}

const cases = {
  async toolRoundTrip({ baseURL, model }) {
    const requests = [];
    const r = await generateText(request(baseURL, model, requests));
    return summary(r.steps, r.text, requests);
  },

  async toolRoundTripStream({ baseURL, model }) {
    const requests = [];
    let failure = null;
    const r = streamText({ ...request(baseURL, model, requests), onError: ({ error }) => { failure = error; } });
    for await (const _ of r.textStream) { /* drain */ }
    if (failure) throw failure;
    return summary(await r.steps, await r.text, requests);
  },
};

module.exports = { cases };
