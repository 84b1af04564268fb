// sd-server's web page in a real browser: headless Chromium fills the form, generates from a
// tiny random model, and the test watches what a user would see: the progress bar and step
// count moving, the live preview, the result with its parameters and download link, the
// gallery, and a cancelled job saying so. Leaves a screenshot of the page.
//
// usage: node browser_test.mjs SD_SERVER MAKE_TINY_MODEL SHARED_DIR OUT_DIR
// Exits 77 (skipped) without Chromium, puppeteer-core (scripts/setup.sh installs both) or
// the CLIP vocabulary in SHARED_DIR.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [SERVER, MAKE_MODEL, SHARED, OUT_DIR] = process.argv.slice(2);
const skip = (why) => {
  console.log(`skipped: ${why}`);
  process.exit(77);
};

let puppeteer;
try {
  puppeteer = (await import("puppeteer-core")).default;
} catch {
  skip("puppeteer-core is not installed (scripts/setup.sh installs it)");
}
const chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));
if (!chromium) skip("no Chromium (Debian's chromium package)");
const vocab = join(SHARED, "data", "clip", "bpe_simple_vocab_16e6.txt.gz");
if (!existsSync(vocab)) skip(`no CLIP vocabulary at ${vocab}`);

const failures = [];
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures.push(what);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const work = mkdtempSync(join(tmpdir(), "sd_browser_test_"));
const model = join(work, "tiny_sdxl.safetensors");
execFileSync(MAKE_MODEL, [model], { stdio: "inherit" });

// The server on a free port; it prints the address it listens on.
const server = spawn(SERVER, ["-m", model, "-t", "1", "--listen-port", "0"], {
  env: { ...process.env, SD_CLIP_VOCAB: vocab, OMP_NUM_THREADS: "1", SD_SERVER_TOKEN: "" },
  stdio: ["ignore", "pipe", "pipe"],
});
server.stderr.on("data", () => {});  // the engine's log; drained so the server never blocks
const url = await new Promise((resolve, reject) => {
  let out = "";
  const timer = setTimeout(() => reject(new Error(`sd-server did not start: ${out}`)), 60000);
  server.stdout.on("data", (d) => {
    out += d;
    const m = out.match(/listening on (http:\/\/\S+)/);
    if (m) {
      clearTimeout(timer);
      resolve(m[1]);
    }
  });
  server.on("exit", (code) => reject(new Error(`sd-server exited (${code}): ${out}`)));
});

const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 800 });
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(e.message));
  await page.goto(url + "/", { waitUntil: "load" });
  await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("Ready:"),
                             { timeout: 30000 });
  check(true, "the page loads and reads the server's capabilities");
  const samplers = await page.$$eval("#sampler option", (os) => os.map((o) => o.value));
  check(samplers.includes("euler"), `the sampler list comes from the server (${samplers.length})`);

  const setField = async (id, value) => {
    await page.$eval(id, (el) => { el.value = ""; });
    await page.type(id, String(value));
  };
  await setField("#prompt", "a red fox in the snow");
  await setField("#width", 64);
  await setField("#height", 64);
  await setField("#steps", 120);
  await setField("#seed", 7);
  await page.select("#sampler", "euler");
  await page.click("#generate");

  // What the user sees while it runs: step text, the bar, the live preview.
  let maxBar = 0, sawSteps = false, sawPreview = false;
  const deadline = Date.now() + 180000;
  while (Date.now() < deadline) {
    const seen = await page.evaluate(() => ({
      bar: document.getElementById("bar").value,
      status: document.getElementById("status").textContent,
      preview: getComputedStyle(document.getElementById("preview")).display !== "none" &&
               document.getElementById("preview").src.startsWith("blob:"),
      done: !!document.querySelector("#result img"),
    }));
    maxBar = Math.max(maxBar, seen.bar);
    sawSteps ||= /Step \d+\/120/.test(seen.status);
    sawPreview ||= seen.preview;
    if (seen.done) break;
    await sleep(50);
  }
  check(sawSteps && maxBar > 0, `progress shown while generating (bar up to ${maxBar}/120)`);
  check(sawPreview, "the live preview shown while generating");

  const result = await page.evaluate(() => {
    const img = document.querySelector("#result img");
    const link = document.querySelector("#result a");
    return {
      width: img ? img.naturalWidth : 0,
      height: img ? img.naturalHeight : 0,
      download: link ? link.download : "",
      href: link ? link.href.slice(0, 22) : "",
      params: document.getElementById("params").textContent,
      status: document.getElementById("status").textContent,
      gallery: document.querySelectorAll("#gallery img").length,
      previewHidden: getComputedStyle(document.getElementById("preview")).display === "none",
    };
  });
  check(result.width === 64 && result.height === 64, `the result image is 64x64 (${result.width}x${result.height})`);
  check(result.download === "sd-7.png" && result.href === "data:image/png;base64,",
        `a download link (${result.download})`);
  check(result.params.includes("seed: 7") && result.params.includes("a red fox"),
        `the result's parameters shown (${JSON.stringify(result.params)})`);
  check(/^Done in \d+ s \(seed 7\)/.test(result.status), `status says done (${result.status})`);
  check(result.gallery === 1, "the gallery holds the result");
  check(result.previewHidden, "the preview gives way to the result");
  mkdirSync(OUT_DIR, { recursive: true });
  await page.screenshot({ path: join(OUT_DIR, "web_page.png"), fullPage: true });

  // A long job, cancelled from the page.
  await setField("#steps", 5000);
  await page.click("#generate");
  await page.waitForFunction(() => /Step \d+\/5000/.test(document.getElementById("status").textContent),
                             { timeout: 60000 });
  await page.click("#cancel");
  await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("Job cancelled"),
                             { timeout: 60000 });
  const afterCancel = await page.evaluate(() => ({
    generate: document.getElementById("generate").disabled,
    cancel: document.getElementById("cancel").disabled,
    gallery: document.querySelectorAll("#gallery img").length,
  }));
  check(!afterCancel.generate && afterCancel.cancel && afterCancel.gallery === 1,
        "a cancelled job says so and the form is ready again");
  check(pageErrors.length === 0, `no script errors on the page (${pageErrors.join("; ")})`);
} finally {
  await browser.close();
  server.kill("SIGTERM");
  rmSync(work, { recursive: true, force: true });
}

console.log(`${failures.length ? "FAILED" : "passed"}: ${failures.length} failure(s)`);
process.exit(failures.length ? 1 : 0);
