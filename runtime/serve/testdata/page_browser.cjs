// Drives the chat page in headless chromium with puppeteer-core: two turns,
// then prints what the page showed as JSON. Arguments: the server's URL, the
// chromium binary, and the API key to give when the page asks (optional).
const puppeteer = require("puppeteer-core");

async function main() {
  const [url, chromium, key] = process.argv.slice(2);
  const browser = await puppeteer.launch({ executablePath: chromium, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
  const out = { turns: [], errors: [] };
  try {
    const page = await browser.newPage();
    page.on("pageerror", (e) => out.errors.push(String(e)));
    out.prompts = 0;
    page.on("dialog", (d) => { out.prompts++; key ? d.accept(key) : d.dismiss(); });
    page.on("console", (m) => { if (m.type() === "error") out.errors.push(m.text()); });
    await page.goto(url, { waitUntil: "load" });
    await page.waitForFunction(() => document.getElementById("model").textContent !== "strata");
    out.model = await page.$eval("#model", (e) => e.textContent);
    for (const [i, text] of ["Hello", "And again"].entries()) {
      await page.type("#input", text);
      await page.keyboard.press("Enter");
      await page.waitForFunction((n) => {
        const s = document.querySelectorAll(".assistant .stats");
        return s.length === n && s[n - 1].textContent !== "";
      }, { timeout: 20000 }, i + 1);
      out.turns.push(await page.evaluate(() => {
        const all = document.querySelectorAll(".assistant");
        const last = all[all.length - 1];
        return { reply: last.querySelector("span").textContent, stats: last.querySelector(".stats").textContent,
          users: document.querySelectorAll(".user").length };
      }));
    }
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
