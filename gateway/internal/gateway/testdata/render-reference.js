// Opens the API reference in headless Chromium and prints, as JSON, what it rendered: the
// section id of every operation Redoc drew, the requests the page made, those its
// Content-Security-Policy blocked before they were made, and the page's errors.
// Usage: node render-reference.js <url> <operations expected>, with PLAYWRIGHT_CORE (the package's directory)
// and CHROMIUM (the browser) in the environment.
const { chromium } = require(process.env.PLAYWRIGHT_CORE);

async function main() {
  const url = process.argv[2];
  const expected = Number(process.argv[3]);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
  try {
    const page = await browser.newPage();
    const requests = [];
    const blocked = [];
    const errors = [];
    page.on("request", (r) => requests.push(r.url()));
    page.on("requestfailed", (r) => {
      if (r.failure() && r.failure().errorText === "csp") blocked.push(r.url());
    });
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(m.text());
    });
    await page.goto(url, { waitUntil: "load" });
    const operation = '[data-section-id*="/operation/"]';
    // Wait (two minutes at most) until Redoc has drawn as many operations as the document
    // has; whatever it drew by then is reported.
    await page
      .waitForFunction(([sel, n]) => document.querySelectorAll(sel).length >= n, [operation, expected], { timeout: 120000 })
      .catch((e) => errors.push("waiting for " + expected + " operations: " + e.message));
    const operations = await page.$$eval(operation, (els) => els.map((e) => e.getAttribute("data-section-id")));
    console.log(JSON.stringify({ operations, requests: requests.filter((r) => !blocked.includes(r)), blocked, errors }));
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
