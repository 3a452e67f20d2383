"""The status page: one self-contained HTML document (no external assets, so it works offline
and behind a proxy). Its script fetches /api/status every 2 s and re-renders; every value from
the API is inserted escaped.

The overall bar is the movement's (`doc.movement`, the meter's reading, `views.progress`):
one percentage (by bytes), with partitions and steps as counts beside it, and the time left by
the same method as each row's, whose figures come from the same meter. The proposals' Approve / Reject buttons POST to the write API with the
write token typed into the page's token field; the token lives in that field only (no storage,
never in the HTML the server sends). Long texts wrap (the grid's columns may shrink below their
content, alert messages break anywhere, wide tables scroll inside their section), so nothing is
wider than the window at 1400 px; after each render the page writes the document's scroll width
and the window's width into `<body data-scroll-width data-window-width>` (the browser test reads
them). Sizes and durations read as in the terminal: the script's `size` and `duration` are
`views.units.UNITS_JS`, the same rule as `format_size` and `format_duration`."""

from __future__ import annotations

from reassigner.operator.views.units import UNITS_JS

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>kafka-reassigner status</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;background:#f4f6f8;color:#1d2733}
 header{background:#1d2733;color:#fff;padding:12px 24px;display:flex;gap:24px;align-items:baseline;flex-wrap:wrap}
 header h1{font-size:20px;margin:0} header span{opacity:.85;font-size:14px}
 main{padding:16px 24px;display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:16px}
 section{background:#fff;border-radius:8px;box-shadow:0 1px 3px rgba(0,0,0,.12);padding:12px 16px;min-width:0;overflow-x:auto}
 section.wide{grid-column:1 / -1}
 h2{font-size:15px;margin:0 0 8px;text-transform:uppercase;letter-spacing:.04em;color:#4a5a6a}
 table{border-collapse:collapse;width:100%;font-size:13px}
 th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e5e9ee;white-space:nowrap}
 th{color:#4a5a6a;font-weight:600}
 .ok{color:#1b7f3b;font-weight:600} .bad{color:#c62828;font-weight:600} .warn{color:#b26a00;font-weight:600}
 .bar{background:#e5e9ee;border-radius:4px;height:12px;width:160px;display:inline-block;vertical-align:middle;overflow:hidden}
 .bar>div{background:#2e7dd7;height:100%}
 .big .bar{width:260px;height:16px}
 .sev-INFO{color:#0277bd}.sev-WARNING{color:#b26a00}.sev-ERROR{color:#c62828}.sev-CRITICAL{color:#fff;background:#c62828;padding:0 4px;border-radius:3px}
 .empty{color:#8795a1;font-style:italic;font-size:13px}
 #banner{display:none;background:#c62828;color:#fff;padding:8px 24px}
 #mode-banner{display:none;background:#fff3cd;color:#6b4e00;padding:8px 24px;font-weight:600}
 .pill{display:inline-block;border-radius:10px;padding:1px 8px;font-size:12px;background:#e5e9ee}
 td.wrap,#alerts td,#banner,.proposal-head{white-space:normal;overflow-wrap:anywhere;word-break:break-word}
 #alerts table{table-layout:fixed} #alerts th:nth-child(1){width:190px} #alerts th:nth-child(2){width:80px}
 #alerts th:nth-child(3){width:170px} #alerts th:nth-child(4){width:200px}
 header .big{white-space:normal;max-width:100%} header span span{opacity:1}
 .proposal{border-top:1px solid #e5e9ee;padding:8px 0}
 .proposal button{margin-left:8px;padding:3px 12px;border-radius:4px;border:1px solid #8795a1;background:#fff;cursor:pointer}
 .proposal button.approve{border-color:#1b7f3b;color:#1b7f3b} .proposal button.reject{border-color:#c62828;color:#c62828}
 #write-token{width:260px} #write-result{font-size:13px;margin-top:6px;white-space:normal;overflow-wrap:anywhere}
 .disk{display:inline-block;width:120px;height:10px;background:#e5e9ee;border-radius:3px;vertical-align:middle;overflow:hidden}
 .disk>div{height:100%;background:#2e7dd7} .disk.full>div{background:#c62828}
</style></head>
<body>
<header><h1>kafka-reassigner</h1><span id="cluster"></span><span id="epoch"></span>
<span id="updated">loading…</span><span class="big" id="overall"></span></header>
<div id="banner"></div>
<div id="mode-banner"></div>
<main>
 <section id="health"><h2>Cluster health</h2><div id="health-body"></div></section>
 <section id="brokers"><h2>Brokers</h2><div id="brokers-body"></div></section>
 <section class="wide" id="proposals"><h2>Proposals awaiting approval</h2>
  <label>write token <input type="password" id="write-token" autocomplete="off"
   placeholder="for Approve / Reject (kept in this field only)"></label>
  <div id="proposals-body"></div><div id="write-result"></div></section>
 <section class="wide" id="reassignments"><h2>Ongoing reassignments</h2><div id="reassignments-body"></div></section>
 <section class="wide" id="external"><h2>Moved by another tool (external)</h2><div id="external-body"></div></section>
 <section class="wide" id="inflight"><h2>Batch in flight</h2><div id="inflight-body"></div></section>
 <section class="wide" id="disks"><h2>Disk usage per broker and log dir</h2><div id="disks-body"></div></section>
 <section class="wide" id="logdirs"><h2>Log-dir moves</h2><div id="logdirs-body"></div></section>
 <section class="wide" id="alerts"><h2>Recent alerts</h2><div id="alerts-body"></div></section>
</main>
<script>
const esc = v => String(v === null || v === undefined ? "–" : v).replace(/[&<>"']/g,
  c => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}[c]));
const list = v => v && v.length ? "[" + v.join(", ") + "]" : "–";
/*UNITS*/
const bar = f => f === null || f === undefined ? "–" :
  `<span class="bar"><div style="width:${Math.round(f * 100)}%"></div></span> ${Math.round(f * 100)}%`;
function table(headers, rows, empty) {
  if (!rows.length) return `<div class="empty">${esc(empty)}</div>`;
  return "<table><tr>" + headers.map(h => `<th>${esc(h)}</th>`).join("") + "</tr>" +
    rows.map(r => "<tr>" + r.map(c => `<td>${c}</td>`).join("") + "</tr>").join("") + "</table>";
}
function render(doc) {
  document.getElementById("cluster").textContent = "cluster " + doc.cluster_name;
  document.getElementById("updated").textContent = "updated " + new Date(doc.generated_at * 1000).toLocaleTimeString();
  const banner = document.getElementById("banner");
  banner.style.display = doc.state_error ? "block" : "none";
  banner.textContent = doc.state_error ? "state unavailable: " + doc.state_error : "";
  const s = doc.status;
  const modeBanner = document.getElementById("mode-banner");
  modeBanner.style.display = s && s.banner ? "block" : "none";
  modeBanner.textContent = s && s.banner ? s.banner : "";
  if (s) {
    document.getElementById("epoch").textContent = `epoch ${s.epoch} · batch ${s.last_batch}`;
    const m = doc.movement || {};
    const rate = m.replication_rate_bytes_per_second === null || m.replication_rate_bytes_per_second === undefined ?
      "rate not measured yet" : size(m.replication_rate_bytes_per_second) + "/s" +
      (m.rate_source === "throttle" ? " (throttle, none observed yet)" : "");
    document.getElementById("overall").innerHTML = s.reassignments.length ?
      `overall ${bar(m.fraction)} (<span id="overall-bytes">${size(m.bytes_moved)} of ${size(m.bytes_to_move)}` +
      `</span> moved; ${esc(m.partitions_done)} of ${esc(m.partitions_total)} partitions and ` +
      `${esc(m.steps_done)} of ${esc(m.steps_estimated)} steps done; ${esc(rate)}; ` +
      `ETA <span id="overall-eta">${duration(m.time_left_seconds)}</span>)` : "";
    const alive = s.brokers.filter(b => b.alive).length;
    const cls = (n, bad) => n ? (bad ? "bad" : "warn") : "ok";
    document.getElementById("health-body").innerHTML = table(["", ""], [
      ["brokers alive", `<span class="${alive === s.brokers.length ? "ok" : "bad"}">${alive} / ${s.brokers.length}</span>`],
      ["topics / partitions", `${s.topics} / ${s.partitions}`],
      ["under-replicated", `<span class="${cls(s.under_replicated.length)}">${s.under_replicated.length}</span> ` +
        esc(s.under_replicated.slice(0, 8).map(p => p.topic + "-" + p.partition).join(" "))],
      ["under min ISR", `<span class="${cls(s.under_min_isr.length, 1)}">${s.under_min_isr.length}</span>`],
      ["offline", `<span class="${cls(s.offline.length, 1)}">${s.offline.length}</span> ` +
        esc(s.offline.slice(0, 8).map(p => p.topic + "-" + p.partition).join(" "))],
      ["reassignments / steps in flight", `${s.reassignments.length} / ${s.in_flight.length}`],
      ["moved by another tool", `<span class="${cls((s.external || []).length)}">${(s.external || []).length}</span>`],
      ["proposals awaiting approval", esc(s.proposals.join(", ") || "none")],
      ["Kafka", esc(s.kafka || "not told yet (the watcher tells it with each snapshot)")],
      ...(s.drain_warning ? [["drains", `<span class="warn">${esc(s.drain_warning)}</span>`]] : []),
    ], "");
    document.getElementById("brokers-body").innerHTML = table(
      ["broker", "rack", "state", "dirs online", "replicas", "leaders", "bytes", "in/s", "out/s",
       "per dir (replicas, bytes)"],
      s.brokers.map(b => [esc(b.id), esc(b.rack),
        (b.alive ? (b.draining ? `<span class="warn">draining${b.cordoned ? ", cordoned" : ""}</span>` :
          '<span class="ok">alive</span>') : '<span class="bad">down</span>') +
          (b.isr_shrinks ? ` <span class="warn">(${esc(b.isr_shrinks)} ISR shrinks in 10 min)</span>` : "") +
          (b.canary_p99_ms != null ? ` canary p99 ${esc(Math.round(b.canary_p99_ms))} ms` +
            (b.canary_baseline_ms != null ? ` (baseline ${esc(Math.round(b.canary_baseline_ms))})` : "") : "") +
          (b.throttle_rate != null ? ` throttle ${esc(b.throttle_rate)} B/s: ${esc(b.throttle_reason)}` : ""),
        `<span class="${b.dirs_online < b.dirs_total ? "bad" : "ok"}">${b.dirs_online}/${b.dirs_total}</span>` +
          (b.cannot_host ? ` <span class="warn">${esc(b.cannot_host)} partitions kept off until restart</span>` : "") +
          ((b.cordoned_dirs || []).length ? ` <span class="warn">(cordoned: ${esc(b.cordoned_dirs.join(", "))})</span>` : "") +
          ((b.cordoned_by_others || []).length ?
            ` <span class="warn">(cordoned by others: ${esc(b.cordoned_by_others.join(", "))})</span>` : ""),
        esc(b.replicas), esc(b.leaders), size(b.disk_bytes),
        s.traffic_measured ? size(b.bytes_in_per_sec) + "/s" : "?",
        s.traffic_measured ? size(b.network_out_per_sec) + "/s" : "?",
        esc((b.dirs || []).map(d => d[0].split("/").pop() + ": " + (d[1] ?? "?") + ", " +
          size(d[2])).join("  "))]), "no brokers observed yet");
    document.getElementById("reassignments-body").innerHTML = table(
      ["partition", "state", "current", "adding", "removing", "final target", "step", "progress",
       "bytes moved / to move", "rate", "ETA", "waits for"],
      s.reassignments.map(r => [esc(r.topic + "-" + r.partition), `<span class="pill">${esc(r.state)}</span>`,
        esc(list(r.current_replicas)), esc(list(r.adding)), esc(list(r.removing)), esc(list(r.final_target)),
        esc(r.step_label), bar(r.progress), esc(size(r.bytes_moved) + " / " + size(r.bytes_to_move)),
        r.rate_bytes_per_second === null || r.rate_bytes_per_second === undefined ? "–" : esc(size(r.rate_bytes_per_second) + "/s"),
        esc(duration(r.time_left_seconds)), `<span class="wrap">${esc(r.waiting || r.reason || "")}</span>`]),
      (s.external || []).length ? "no reassignment of the product in progress" : "no reassignment in progress");
    document.querySelectorAll("#reassignments td:last-child").forEach(td => td.classList.add("wrap"));
    document.getElementById("disks-body").innerHTML = table(
      ["broker", "log dir", "state", "replicas", "replica bytes", "volume used", "volume size"],
      (s.disks || []).map(d => [esc(d.broker_id), esc(d.path),
        d.online ? '<span class="ok">online</span>' : '<span class="bad">offline</span>',
        esc(d.replicas), esc(size(d.replica_bytes)),
        d.used_fraction === null ? "?" : `<span class="disk${d.used_fraction > 0.85 ? " full" : ""}">` +
          `<div style="width:${Math.round(d.used_fraction * 100)}%"></div></span> ${Math.round(d.used_fraction * 100)}%`,
        esc(size(d.total_bytes))]), "no log dirs reported yet");
    const proposals = s.proposal_details || [];
    document.getElementById("proposals").style.display = proposals.length ? "" : "none";
    document.getElementById("proposals-body").innerHTML = proposals.map(v =>
      `<div class="proposal"><div class="proposal-head"><b>${esc(v.proposal_id)}</b>: ${esc(v.reason)} ` +
      `(${esc(v.moves.length)} partitions, ${esc(v.replica_moves)} replica moves` +
      (v.expires_at_ms ? `, expires ${esc(new Date(v.expires_at_ms).toLocaleString())}` : "") + ")" +
      `<button class="approve" data-proposal="${esc(v.proposal_id)}" data-verb="approve">Approve</button>` +
      `<button class="reject" data-proposal="${esc(v.proposal_id)}" data-verb="reject">Reject</button></div>` +
      table(["partition", "current", "target", "adding", "removing", "size"],
        v.moves.map(m => [esc(m.topic + "-" + m.partition), esc(list(m.current_replicas)), esc(list(m.target)),
          esc(list(m.adding)), esc(list(m.removing)), esc(size(m.size_bytes))]), "no moves") + "</div>").join("");
    document.getElementById("external-body").innerHTML = table(
      ["partition", "kind", "replicas", "adding", "removing", "seen for", "our reassignment waiting"],
      (s.external || []).map(e => [esc(e.topic + "-" + e.partition), `<span class="pill">${esc(e.kind)}</span>`,
        esc(list(e.replicas)), esc(list(e.adding)), esc(list(e.removing)), esc(duration(e.age_seconds)),
        esc(e.held_by)]), "no other tool moves a partition");
    document.getElementById("inflight-body").innerHTML = table(
      ["partition", "step", "target", "adding", "removing", "leader move", "running for"],
      s.in_flight.map(f => [esc(f.topic + "-" + f.partition), esc(f.step), esc(list(f.target)),
        esc(list(f.adding)), esc(list(f.removing)), f.leader_movement ? "yes" : "no",
        f.age_seconds === null ? "–" : esc(duration(f.age_seconds))]), "nothing in flight");
    document.getElementById("logdirs-body").innerHTML = table(
      ["partition", "broker", "from", "to", "size", "state", "now in", "running for"],
      (s.log_dir_moves || []).map(m => [esc(m.topic + "-" + m.partition), esc(m.broker_id), esc(m.origin_dir),
        esc(m.target_dir), esc(size(m.size_bytes)),
        `<span class="pill">${esc(m.state)}</span>` + (m.future_replica ? " copying" : ""), esc(m.current_dir),
        m.age_seconds === null ? "–" : esc(duration(m.age_seconds))]), "no log-dir move");
  }
  document.getElementById("alerts-body").innerHTML = table(
    ["time", "severity", "kind", "subject", "message"],
    doc.alerts.slice().reverse().map(a => [esc(a.time), `<span class="sev-${esc(a.severity)}">${esc(a.severity)}</span>`,
      esc(a.kind), esc(a.subject), esc(a.message)]), "no alerts");
}
async function decide(proposal, verb) {
  const token = document.getElementById("write-token").value.trim();
  const out = document.getElementById("write-result");
  if (!token) { out.textContent = "type the write token first"; return; }
  out.textContent = `${verb} ${proposal}: waiting for the pipeline's verdict…`;
  try {
    const answer = await fetch(`/api/proposals/${encodeURIComponent(proposal)}/${verb}?wait=30`,
      {method: "POST", cache: "no-store", headers: {"Authorization": "Bearer " + token}});
    const body = await answer.json();
    out.textContent = `${verb} ${proposal}: ${answer.status} ` + (body.verdict ? body.verdict +
      (body.error_code ? " [" + body.error_code + "]" : "") + (body.message ? ": " + body.message : "") : body.error);
  } catch (error) { out.textContent = `${verb} ${proposal}: ${error}`; }
}
document.getElementById("proposals-body").addEventListener("click", event => {
  const button = event.target.closest("button[data-proposal]");
  if (button) decide(button.dataset.proposal, button.dataset.verb);
});
function measure() {
  document.body.dataset.scrollWidth = document.documentElement.scrollWidth;
  document.body.dataset.windowWidth = window.innerWidth;
}
async function refresh() {
  try {
    const answer = await fetch("/api/status", {cache: "no-store"});
    render(await answer.json());
    measure();
  } catch (error) {
    const banner = document.getElementById("banner");
    banner.style.display = "block"; banner.textContent = "status server unreachable: " + error;
  }
}
refresh(); setInterval(refresh, 2000);
</script></body></html>
"""

STATUS_PAGE_HTML = _PAGE.replace("/*UNITS*/", UNITS_JS)
