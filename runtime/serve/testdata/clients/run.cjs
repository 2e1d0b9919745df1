// Runs one npm client's cases against a strata server. Arguments: the
// client (a module beside this one: openai, aisdk), the server's base URL,
// the model id, then the names of the cases to run (default: all). Each
// case is an async function of { baseURL, model } returning what the client
// saw; the output is one JSON object of case name -> result, or
// { error } where the case threw. The Go test (chatmodel_node_test.go)
// checks each result.
const [clientName, baseURL, model, ...only] = process.argv.slice(2);
const { cases } = require(`./${clientName}.cjs`);

async function main() {
  const names = only.length > 0 ? only : Object.keys(cases);
  const out = {};
  for (const name of names) {
    if (!cases[name]) {
      out[name] = { error: `no case ${name} in ${clientName}.cjs` };
      continue;
    }
    try {
      out[name] = await cases[name]({ baseURL, model });
    } catch (e) {
      out[name] = { error: String((e && e.stack) || e) };
    }
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
