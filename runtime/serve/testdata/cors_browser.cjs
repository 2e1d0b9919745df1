// A web page on one origin calls the API on another, in headless chromium
// (puppeteer-core): with the key, not streamed and streamed; without it;
// and from an origin the server does not allow. Prints what the page saw as
// JSON. Arguments: the page's URL, a disallowed page's URL, the API's URL,
// the key, the chromium binary.
const puppeteer = require("puppeteer-core");

async function calls(page, api, key) {
  return page.evaluate(async (api, key) => {
    const out = {};
    const body = JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 8 });
    const post = (headers, extra) => fetch(api + "/v1/chat/completions", { method: "POST",
      headers: { "Content-Type": "application/json", ...headers }, body: extra || body });
    try {
      const r = await post({ Authorization: "Bearer " + key, "X-Stainless-OS": "Linux" });
      const j = await r.json();
      out.plain = { status: r.status, content: j.choices[0].message.content };
      const s = await post({ Authorization: "Bearer " + key },
        JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 8, stream: true }));
      out.stream = { status: s.status, text: await s.text() };
      const u = await post({});
      out.noKey = { status: u.status, code: (await u.json()).error.code };
    } catch (e) {
      out.error = String(e);
    }
    return out;
  }, api, key);
}

async function main() {
  const [pageURL, otherURL, api, key, chromium] = process.argv.slice(2);
  const browser = await puppeteer.launch({ executablePath: chromium, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
  const out = {};
  try {
    const page = await browser.newPage();
    await page.goto(pageURL, { waitUntil: "load" });
    out.allowed = await calls(page, api, key);
    const other = await browser.newPage();
    await other.goto(otherURL, { waitUntil: "load" });
    out.other = await calls(other, api, key);
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
