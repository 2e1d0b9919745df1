// Cases for the Vercel AI SDK (ai v5 with @ai-sdk/openai-compatible and
// zod): generateText and streamText run the round trip themselves (the
// model calls the tool, the SDK executes it and sends the result, the model
// answers). Each tool case returns { calls: [{ name, arguments }],
// finishes: [first step, second step], answer, requests }: requests are the
// bodies the SDK sent (messages, tools), recorded through its fetch hook, so
// the test can work out the model's replies to them itself.
const { generateText, generateObject, streamText, tool, stepCountIs } = require("ai");
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

  // generateObject with a zod schema: the SDK sends response_format
  // json_schema (structured outputs on) and parses and validates the reply
  // itself, so an object it returns is one that followed the schema.
  async jsonSchema({ baseURL, model }) {
    const provider = createOpenAICompatible({ name: "strata", baseURL: baseURL + "/v1", apiKey: "none",
      supportsStructuredOutputs: true });
    const r = await generateObject({ model: provider.chatModel(model), prompt: weather.reportQuestion,
      schema: z.object({ city: z.string().max(40), temp_c: z.number().int(),
        condition: z.enum(["sunny", "cloudy", "raining", "snowing"]) }).strict(),
      maxOutputTokens: 120, temperature: 0, maxRetries: 0 });
    return { content: JSON.stringify(r.object), finish: r.finishReason };
  },

  // toolChoice "required": the SDK raises ToolChoiceViolationError-style
  // failures when the reply has no call; the server forces one.
  async forcedTool({ baseURL, model }) {
    const requests = [];
    const r = await generateText({ model: chatModel(baseURL, model, requests), prompt: weather.smallTalk, tools,
      toolChoice: "required", stopWhen: stepCountIs(1), maxOutputTokens: 100, temperature: 0, maxRetries: 0 });
    return { calls: r.toolCalls.map((c) => ({ name: c.toolName, arguments: JSON.stringify(c.input) })),
      finish: r.finishReason };
  },

  // logprobs through the SDK's OpenAI provider (its chat model: the
  // openai-compatible provider does not read them), three alternatives.
  async logprobs({ baseURL, model }) {
    const { createOpenAI } = require("@ai-sdk/openai");
    const provider = createOpenAI({ baseURL: baseURL + "/v1", apiKey: "none" });
    const r = await generateText({ model: provider.chat(model), prompt: weather.smallTalk, maxOutputTokens: 12,
      temperature: 0, maxRetries: 0, providerOptions: { openai: { logprobs: 3 } } });
    const lps = (r.providerMetadata && r.providerMetadata.openai && r.providerMetadata.openai.logprobs) || [];
    return { content: r.text, tokens: lps.map((lp) => ({ token: lp.token, logprob: lp.logprob,
      top: lp.top_logprobs.map((t) => ({ token: t.token, logprob: t.logprob })) })) };
  },

  // toolChoice naming a tool the question does not need: that call.
  async namedTool({ baseURL, model }) {
    const requests = [];
    const r = await generateText({ model: chatModel(baseURL, model, requests), prompt: weather.question, tools,
      toolChoice: { type: "tool", toolName: "read_file" }, stopWhen: stepCountIs(1), maxOutputTokens: 100,
      temperature: 0, maxRetries: 0 });
    return { calls: r.toolCalls.map((c) => ({ name: c.toolName, arguments: JSON.stringify(c.input) })),
      finish: r.finishReason };
  },
};

module.exports = { cases };
