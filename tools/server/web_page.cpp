#include "server/web_page.h"

namespace sd::server {

// Polls rather than using EventSource: EventSource cannot send the Authorization header.
const char* const kWebPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sd-server</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 0; background: #f4f4f6; color: #222; }
  main { display: flex; flex-wrap: wrap; gap: 1.5rem; padding: 1.5rem; }
  form { background: #fff; padding: 1rem; border-radius: 8px; width: 22rem; }
  label { display: block; margin: .5rem 0 .15rem; font-size: .85rem; color: #555; }
  input, select, textarea { width: 100%; box-sizing: border-box; padding: .35rem; font: inherit; }
  textarea { height: 4.5rem; resize: vertical; }
  .row { display: flex; gap: .5rem; } .row > div { flex: 1; }
  button { margin-top: .8rem; padding: .5rem 1rem; font: inherit; cursor: pointer; }
  #out { background: #fff; padding: 1rem; border-radius: 8px; flex: 1; min-width: 20rem; }
  progress { width: 100%; height: 1.1rem; }
  #result img { max-width: 100%; border-radius: 4px; }
  #preview { width: 256px; max-width: 100%; image-rendering: pixelated; border-radius: 4px;
             display: block; margin: .5rem 0; }
  #preview[hidden] { display: none; }
  #params { font-size: .8rem; white-space: pre-wrap; color: #555; }
  #gallery img { width: 96px; height: 96px; object-fit: cover; margin: 2px; cursor: pointer; }
  .error { color: #b00020; }
</style>
</head>
<body>
<main>
<form id="form">
  <label for="prompt">Prompt</label><textarea id="prompt">a lovely cat</textarea>
  <label for="negative">Negative prompt</label><textarea id="negative"></textarea>
  <div class="row">
    <div><label for="width">Width</label><input id="width" type="number" min="8" step="8" value="512"></div>
    <div><label for="height">Height</label><input id="height" type="number" min="8" step="8" value="512"></div>
  </div>
  <div class="row">
    <div><label for="steps">Steps</label><input id="steps" type="number" min="1" value="20"></div>
    <div><label for="cfg">CFG scale</label><input id="cfg" type="number" min="0" step="0.5" value="7"></div>
  </div>
  <label for="sampler">Sampler</label><select id="sampler"><option value="">model default</option></select>
  <label for="scheduler">Scheduler</label><select id="scheduler"><option value="">model default</option></select>
  <label for="lora">LoRA</label><select id="lora"><option value="">none</option></select>
  <div class="row">
    <div><label for="seed">Seed (-1: random)</label><input id="seed" type="number" value="-1"></div>
    <div><label for="token">API token</label><input id="token" type="password" autocomplete="off"></div>
  </div>
  <button id="generate" type="submit">Generate</button>
  <button id="cancel" type="button" disabled>Cancel</button>
</form>
<section id="out">
  <div id="status">Ready.</div>
  <progress id="bar" max="1" value="0"></progress>
  <img id="preview" alt="live preview" hidden>
  <div id="result"></div>
  <div id="params"></div>
  <h3>This session</h3>
  <div id="gallery"></div>
</section>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const tokenBox = $("token");
tokenBox.value = localStorage.getItem("sd-server-token") || "";
tokenBox.addEventListener("change", () => { localStorage.setItem("sd-server-token", tokenBox.value); load(); });
let jobId = null;

async function api(path, options = {}) {
  options.headers = Object.assign({ "Content-Type": "application/json" }, options.headers || {});
  if (tokenBox.value) options.headers["Authorization"] = "Bearer " + tokenBox.value;
  const res = await fetch(path, options);
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error ? body.error.message : "HTTP " + res.status);
  return body;
}

function fill(select, names) {
  for (const name of names) {
    const o = document.createElement("option");
    o.value = o.textContent = name;
    select.appendChild(o);
  }
}

function show(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

async function load() {
  try {
    const caps = await api("/sdcpp/v1/capabilities");
    for (const id of ["sampler", "scheduler", "lora"]) $(id).length = 1;
    fill($("sampler"), caps.samplers);
    fill($("scheduler"), caps.schedulers);
    fill($("lora"), caps.loras.map((l) => l.path));
    const d = caps.defaults;
    $("width").value = d.width; $("height").value = d.height;
    $("steps").value = d.sample_params.sample_steps;
    $("cfg").value = d.sample_params.guidance.txt_cfg;
    show("Ready: " + caps.model.name);
  } catch (e) { show(e.message, true); }
}

function request() {
  const sample = { sample_steps: +$("steps").value, guidance: { txt_cfg: +$("cfg").value } };
  if ($("sampler").value) sample.sample_method = $("sampler").value;
  if ($("scheduler").value) sample.scheduler = $("scheduler").value;
  const body = {
    prompt: $("prompt").value, negative_prompt: $("negative").value,
    width: +$("width").value, height: +$("height").value, seed: +$("seed").value,
    sample_params: sample,
  };
  if ($("lora").value) body.lora = [{ path: $("lora").value, multiplier: 1 }];
  return body;
}

// The live preview is fetched with the token (an <img> URL could not send it) and shown
// only when its step changed.
let previewStep = 0;
async function showPreview(preview) {
  if (!preview || preview.step === previewStep) return;
  previewStep = preview.step;
  const headers = tokenBox.value ? { Authorization: "Bearer " + tokenBox.value } : {};
  const res = await fetch(preview.url, { headers });
  if (!res.ok || !jobId) return;
  const img = $("preview"), old = img.src;
  img.src = URL.createObjectURL(await res.blob());
  img.title = "step " + preview.step;
  img.hidden = false;
  if (old.startsWith("blob:")) URL.revokeObjectURL(old);
}

function finished(job) {
  $("preview").hidden = true;
  previewStep = 0;
  $("generate").disabled = false;
  $("cancel").disabled = true;
  jobId = null;
  if (job.status !== "completed") { show("Job " + job.status + ": " + (job.error ? job.error.message : ""), true); return; }
  $("bar").value = $("bar").max;
  const image = job.result.images[0];
  const url = "data:image/" + job.result.output_format + ";base64," + image.b64_json;
  const seconds = job.completed - job.started;
  show("Done in " + seconds + " s (seed " + image.seed + ").");
  $("result").innerHTML = "";
  const img = document.createElement("img");
  img.src = url; img.alt = "result";
  const link = document.createElement("a");
  link.href = url; link.download = "sd-" + image.seed + "." + job.result.output_format;
  link.textContent = "Download";
  $("result").append(img, document.createElement("br"), link);
  $("params").textContent = "prompt: " + $("prompt").value + "\nseed: " + image.seed +
      ", " + $("width").value + "x" + $("height").value + ", steps " + $("steps").value;
  const thumb = img.cloneNode();
  thumb.title = $("prompt").value + " (seed " + image.seed + ")";
  thumb.addEventListener("click", () => window.open().document.write('<img src="' + url + '">'));
  $("gallery").prepend(thumb);
}

async function poll() {
  if (!jobId) return;
  try {
    const job = await api("/sdcpp/v1/jobs/" + jobId);
    if (["completed", "failed", "cancelled"].includes(job.status)) return finished(job);
    const p = job.progress;
    if (job.status === "queued") show("Queued (position " + job.queue_position + ")");
    else if (p.steps > 0) {
      $("bar").max = p.steps; $("bar").value = p.step;
      show("Step " + p.step + "/" + p.steps + " (" + p.seconds_per_step.toFixed(2) + " s/it)");
    } else show("Generating...");
    await showPreview(job.preview);
    setTimeout(poll, 400);
  } catch (e) { show(e.message, true); setTimeout(poll, 1500); }
}

$("form").addEventListener("submit", async (event) => {
  event.preventDefault();
  try {
    $("generate").disabled = true;
    $("bar").value = 0;
    const job = await api("/sdcpp/v1/img_gen", { method: "POST", body: JSON.stringify(request()) });
    jobId = job.id;
    $("cancel").disabled = false;
    show("Queued");
    poll();
  } catch (e) { $("generate").disabled = false; show(e.message, true); }
});

$("cancel").addEventListener("click", async () => {
  if (!jobId) return;
  try { await api("/sdcpp/v1/jobs/" + jobId + "/cancel", { method: "POST" }); }
  catch (e) { show(e.message, true); }
});

load();
</script>
</body>
</html>
)HTML";

}  // namespace sd::server
