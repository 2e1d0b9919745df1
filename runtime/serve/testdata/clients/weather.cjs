// The tool round trip every client runs against the chat model: the
// conversation of tiny-go-chat's reference (models/tiny-go-chat/
// reference.json): a system message, two tools offered, the weather asked
// for; the tool answers with the reference's result.
const system = "You are a helpful assistant.";
const question = "What is the weather in Oslo?";
const tools = [
  { name: "get_weather", description: "Get the weather for a city", param: "city" },
  { name: "read_file", description: "Read a file from the workspace and return its contents", param: "path" },
];

// The tools as OpenAI's chat API takes them, keys in the reference's order.
const openaiTools = tools.map((t) => ({
  type: "function",
  function: { name: t.name, description: t.description,
    parameters: { type: "object", properties: { [t.param]: { type: "string" } }, required: [t.param] } },
}));

// run executes a tool call (name, arguments as an object) as the client's
// side of the round trip would.
function run(name, args) {
  if (name === "get_weather") return { city: args.city, temp_c: 4, condition: "snowing" };
  if (name === "read_file") return { path: args.path, contents: "" };
  throw new Error(`unknown tool ${name}`);
}

// pythonJSON writes a flat object as Python's json.dumps does (the
// reference's tool result: {"city": "Oslo", "temp_c": 4, ...}).
function pythonJSON(o) {
  return "{" + Object.entries(o).map(([k, v]) => JSON.stringify(k) + ": " + JSON.stringify(v)).join(", ") + "}";
}

// A weather report as structured output: the JSON Schema both clients ask
// the reply to follow (the AI SDK's zod schema in aisdk.cjs is the same).
const reportQuestion = "Report the weather in Oslo as JSON.";
const reportSchema = {
  type: "object",
  properties: {
    city: { type: "string", maxLength: 40 },
    temp_c: { type: "integer" },
    condition: { type: "string", enum: ["sunny", "cloudy", "raining", "snowing"] },
  },
  required: ["city", "temp_c", "condition"],
  additionalProperties: false,
};

// smallTalk needs no tool: a forced call (tool_choice "required") is the
// server's doing, not the model's.
const smallTalk = "Hello! How are you today?";

module.exports = { system, question, tools, openaiTools, run, pythonJSON, reportQuestion, reportSchema, smallTalk };
