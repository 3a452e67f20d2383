"""The status page: one self-contained HTML document (no external assets, so it works offline
and behind a proxy). Its script fetches /api/status every 2 s and re-renders; every value from
the API is inserted escaped."""

from __future__ import annotations

STATUS_PAGE_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>kafka-reassigner status</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;background:#f4f6f8;color:#1d2733}
 header{background:#1d2733;color:#fff;padding:12px 24px;display:flex;gap:24px;align-items:baseline;flex-wrap:wrap}
 header h1{font-size:20px;margin:0} header span{opacity:.85;font-size:14px}
 main{padding:16px 24px;display:grid;grid-template-columns:1fr 1fr;gap:16px}
 section{background:#fff;border-radius:8px;box-shadow:0 1px 3px rgba(0,0,0,.12);padding:12px 16px}
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
 .pill{display:inline-block;border-radius:10px;padding:1px 8px;font-size:12px;background:#e5e9ee}
</style></head>
<body>
<header><h1>kafka-reassigner</h1><span id="cluster"></span><span id="epoch"></span>
<span id="updated">loading…</span><span class="big" id="overall"></span></header>
<div id="banner"></div>
<main>
 <section id="health"><h2>Cluster health</h2><div id="health-body"></div></section>
 <section id="brokers"><h2>Brokers</h2><div id="brokers-body"></div></section>
 <section class="wide" id="reassignments"><h2>Ongoing reassignments</h2><div id="reassignments-body"></div></section>
 <section class="wide" id="external"><h2>Moved by another tool (external)</h2><div id="external-body"></div></section>
 <section class="wide" id="inflight"><h2>Batch in flight</h2><div id="inflight-body"></div></section>
 <section class="wide" id="logdirs"><h2>Log-dir moves</h2><div id="logdirs-body"></div></section>
 <section class="wide" id="alerts"><h2>Recent alerts</h2><div id="alerts-body"></div></section>
</main>
<script>
const esc = v => String(v === null || v === undefined ? "–" : v).replace(/[&<>"']/g,
  c => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}[c]));
const list = v => v && v.length ? "[" + v.join(", ") + "]" : "–";
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
  if (s) {
    document.getElementById("epoch").textContent = `epoch ${s.epoch} · batch ${s.last_batch}`;
    const size = v => v === null || v === undefined ? "?" :
      (v >= 1e9 ? (v / 1e9).toFixed(1) + " GB" : v >= 1e6 ? (v / 1e6).toFixed(1) + " MB" :
       v >= 1e3 ? (v / 1e3).toFixed(1) + " KB" : Math.round(v) + " B");
    const duration = v => v === null || v === undefined ? "?" :
      (v >= 3600 ? Math.floor(v / 3600) + " h " + Math.round((v % 3600) / 60) + " min" :
       v >= 60 ? Math.floor(v / 60) + " min " + Math.round(v % 60) + " s" : Math.round(v) + " s");
    const p = s.progress;
    document.getElementById("overall").innerHTML = s.reassignments.length ?
      `overall ${bar(p.fraction)} (${p.steps_done}/${p.steps_estimated} steps; ${size(p.bytes_moved)} of ` +
      `${size(p.bytes_to_move)}; ${p.replication_rate_bytes_per_second === null ? "rate not measured yet" :
        size(p.replication_rate_bytes_per_second) + "/s"}; ${duration(p.time_left_seconds)} left)` : "";
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
    ], "");
    document.getElementById("brokers-body").innerHTML = table(
      ["broker", "rack", "state", "dirs online", "replicas", "leaders", "per dir (replicas, bytes)"],
      s.brokers.map(b => [esc(b.id), esc(b.rack),
        b.alive ? (b.draining ? '<span class="warn">draining</span>' : '<span class="ok">alive</span>') : '<span class="bad">down</span>',
        `<span class="${b.dirs_online < b.dirs_total ? "bad" : "ok"}">${b.dirs_online}/${b.dirs_total}</span>` +
          (b.cannot_host ? ` <span class="warn">${esc(b.cannot_host)} partitions kept off until restart</span>` : ""),
        esc(b.replicas), esc(b.leaders),
        esc((b.dirs || []).map(d => d[0].split("/").pop() + ": " + (d[1] ?? "?") + ", " +
          (d[2] === null ? "?" : d[2].toLocaleString())).join("  "))]), "no brokers observed yet");
    document.getElementById("reassignments-body").innerHTML = table(
      ["partition", "state", "current", "adding", "removing", "final target", "step", "progress",
       "bytes moved / to move", "time left", "reason"],
      s.reassignments.map(r => [esc(r.topic + "-" + r.partition), `<span class="pill">${esc(r.state)}</span>`,
        esc(list(r.current_replicas)), esc(list(r.adding)), esc(list(r.removing)), esc(list(r.final_target)),
        esc(r.step_label), bar(r.progress), esc(size(r.bytes_moved) + " / " + size(r.bytes_to_move)),
        esc(duration(r.time_left_seconds)), esc(r.reason)]),
      (s.external || []).length ? "no reassignment of the product in progress" : "no reassignment in progress");
    document.getElementById("external-body").innerHTML = table(
      ["partition", "kind", "replicas", "adding", "removing", "seen for", "our reassignment waiting"],
      (s.external || []).map(e => [esc(e.topic + "-" + e.partition), `<span class="pill">${esc(e.kind)}</span>`,
        esc(list(e.replicas)), esc(list(e.adding)), esc(list(e.removing)), esc(duration(e.age_seconds)),
        esc(e.held_by)]), "no other tool moves a partition");
    document.getElementById("inflight-body").innerHTML = table(
      ["partition", "step", "target", "adding", "removing", "leader move", "running for"],
      s.in_flight.map(f => [esc(f.topic + "-" + f.partition), esc(f.step), esc(list(f.target)),
        esc(list(f.adding)), esc(list(f.removing)), f.leader_movement ? "yes" : "no",
        f.age_seconds === null ? "–" : esc(Math.round(f.age_seconds) + " s")]), "nothing in flight");
    document.getElementById("logdirs-body").innerHTML = table(
      ["partition", "broker", "from", "to", "bytes", "state", "now in", "running for"],
      (s.log_dir_moves || []).map(m => [esc(m.topic + "-" + m.partition), esc(m.broker_id), esc(m.origin_dir),
        esc(m.target_dir), esc(m.size_bytes.toLocaleString()),
        `<span class="pill">${esc(m.state)}</span>` + (m.future_replica ? " copying" : ""), esc(m.current_dir),
        m.age_seconds === null ? "–" : esc(Math.round(m.age_seconds) + " s")]), "no log-dir move");
  }
  document.getElementById("alerts-body").innerHTML = table(
    ["time", "severity", "kind", "subject", "message"],
    doc.alerts.slice().reverse().map(a => [esc(a.time), `<span class="sev-${esc(a.severity)}">${esc(a.severity)}</span>`,
      esc(a.kind), esc(a.subject), esc(a.message)]), "no alerts");
}
async function refresh() {
  try {
    const answer = await fetch("/api/status", {cache: "no-store"});
    render(await answer.json());
  } catch (error) {
    const banner = document.getElementById("banner");
    banner.style.display = "block"; banner.textContent = "status server unreachable: " + error;
  }
}
refresh(); setInterval(refresh, 2000);
</script></body></html>
"""
