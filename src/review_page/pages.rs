//! The review pages' HTML: minijinja templates with HTML auto-escaping on (every value a
//! template prints is escaped unless it is marked safe, and the only safe values are built by
//! [`details_html`], which escapes every string it emits). Questions, SQL, notes and details are
//! hostile input; the pages also carry a Content-Security-Policy that allows no inline script,
//! so even an escaping bug could not run one. The keyboard shortcuts live in `review.js`,
//! served as a static file.

use minijinja::{Environment, HtmlEscape};
use serde_json::Value;

/// The review page's script: remembers the reviewer's name and maps keys to the label buttons.
pub const SCRIPT: &str = r#"// sqlgrade review page: keyboard shortcuts and the remembered reviewer name.
(function () {
  var name = document.getElementById('reviewer');
  if (name) {
    if (!name.value) { name.value = localStorage.getItem('sqlgrade.reviewer') || ''; }
    name.addEventListener('change', function () { localStorage.setItem('sqlgrade.reviewer', name.value); });
    document.querySelectorAll('form.label').forEach(function (f) {
      f.addEventListener('submit', function () { localStorage.setItem('sqlgrade.reviewer', name.value); });
    });
  }
  var keys = { c: 'label-correct', x: 'label-incorrect', u: 'label-unsure', n: 'next-event', j: 'next-event', q: 'back-to-queue' };
  document.addEventListener('keydown', function (e) {
    var t = e.target && e.target.tagName;
    if (t === 'INPUT' || t === 'TEXTAREA' || t === 'SELECT' || e.ctrlKey || e.metaKey || e.altKey) { return; }
    var id = keys[e.key];
    var el = id && document.getElementById(id);
    if (el) { e.preventDefault(); el.click(); }
  });
})();
"#;

const LAYOUT: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{% block title %}sqlgrade review{% endblock %}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:.6em 1.2em}header a{color:#fff;margin-right:1.2em;text-decoration:none}
main{padding:1em 1.2em;max-width:1300px}
table{border-collapse:collapse;background:#fff;margin:.4em 0 1em}td,th{border:1px solid #d6d9e0;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#eef0f4}pre{background:#fff;border:1px solid #d6d9e0;padding:.5em;white-space:pre-wrap;word-break:break-word;margin:.2em 0}
.bar{display:inline-block;background:#5b7bd5;height:10px;vertical-align:middle}.muted{color:#6b7280}
.firing{color:#b42318;font-weight:600}.changed{color:#7a2e0e;background:#fef0c7;border-radius:3px;padding:0 .3em}.resolved{color:#067647}.reason{display:inline-block;background:#fff1e6;border:1px solid #f4c095;border-radius:3px;padding:0 .3em;margin:0 .2em .2em 0}
button{font-size:14px;padding:.3em .9em;margin-right:.4em}dl.d{margin:.2em 0 .2em 1em}dl.d dt{font-weight:600}dl.d dd{margin:0 0 .3em 1em}
figure.chart-box{margin:.4em 0 .8em}figure.chart-box figcaption{font-weight:600}.legend-entry{margin-right:1em;white-space:nowrap}.diff{color:#475467}form#filters label{margin-right:.8em}
.msg{background:#ecfdf3;border:1px solid #6ce9a6;padding:.4em .8em}.err{background:#fef3f2;border:1px solid #fda29b;padding:.4em .8em}
</style></head><body>
<header><a href="/"><b>sqlgrade</b> review</a><a href="/">Overview</a><a href="/queue">Review queue</a></header>
<main>{% block body %}{% endblock %}</main>
<footer class="muted" style="padding:0 1.2em 1em">Data: {{ source }} · keys on an event: c correct · x incorrect · u unsure · n next · q queue</footer>
<script src="/static/review.js"></script>
</body></html>"#;

const OVERVIEW: &str = r##"{% extends "layout.html" %}
{% block title %}sqlgrade review — overview{% endblock %}
{% block body %}
<h1>Overview</h1>
<p class="muted">Φ and tier shares over scored line-rate STEF rows; rows that were not scored are left out of every mean and counted in "scored". "Flagged" is the share the line-rate verdict flags (<code>p_correct</code> below the correctness model's threshold). "Correct, line rate + people" needs no LLM: the mean <code>p_correct</code>, rectified by people's labels on the <a href="/queue?slice=calibration">calibration slice</a> (prediction-powered inference, 95% interval; without such labels, the model's own mean, marked "model only"). "Correct, LLM + people" is prediction-powered inference over the LLM judge's uniform slice, with human labels in place of the LLM judge where both exist.</p>
<form id="filters" method="get" action="/">
<label>app <select name="app"><option value="">all</option>{% for a in monitor.apps %}<option{% if a == filter.app %} selected{% endif %}>{{ a }}</option>{% endfor %}</select></label>
<label>agent <select name="agent"><option value="">all</option>{% for a in monitor.agents %}<option{% if a == filter.agent %} selected{% endif %}>{{ a }}</option>{% endfor %}</select></label>
<label>version <select name="version"><option value="">all</option>{% for v in monitor.versions %}<option{% if v == filter.version %} selected{% endif %}>{{ v }}</option>{% endfor %}</select></label>
<button type="submit">filter</button>{% if filtered %} <a href="/">clear</a>{% endif %}
</form>
<h2>Over time</h2>
<p class="muted">Per series, per {{ monitor.bucket }} ({{ monitor.buckets }} bucket{% if monitor.buckets != 1 %}s{% endif %}; hours for up to two days of data, days beyond): mean Φ over scored line-rate rows; the share the line-rate verdict flags; the estimated share correct — prediction-powered inference over the LLM judge's uniform slice where a bucket has judged events (95% interval as a whisker), else the correctness model's mean <code>p_correct</code> (its whisker is the interval of a mean over the bucket's events, not of the model's bias; the table below rectifies it with people's labels). A gap is a bucket without scored events; a dashed red line is an alert firing. The filters apply to the charts and the table.</p>
<div id="monitor">
{% for c in monitor.charts %}
<figure class="chart-box"><figcaption>{{ c.title }}</figcaption>
<svg id="{{ c.id }}" class="chart" width="{{ plot[0] + plot[2] + 16 }}" height="{{ plot[1] + plot[3] + 30 }}" viewBox="0 0 {{ plot[0] + plot[2] + 16 }} {{ plot[1] + plot[3] + 30 }}" role="img" aria-label="{{ c.title }} per series over time">
<rect x="{{ plot[0] }}" y="{{ plot[1] }}" width="{{ plot[2] }}" height="{{ plot[3] }}" fill="#fff" stroke="#d6d9e0"/>
{% for t in c.y_ticks %}<line x1="{{ plot[0] }}" x2="{{ plot[0] + plot[2] }}" y1="{{ t[0] }}" y2="{{ t[0] }}" stroke="#eef0f4"/><text x="{{ plot[0] - 6 }}" y="{{ t[0] + 4 }}" font-size="11" text-anchor="end">{{ t[1] }}</text>{% endfor %}
{% for t in c.x_ticks %}<text x="{{ t[0] }}" y="{{ plot[1] + plot[3] + 16 }}" font-size="11" text-anchor="middle">{{ t[1] }}</text>{% endfor %}
{% for m in c.markers %}<line class="alert-marker" x1="{{ m.x }}" x2="{{ m.x }}" y1="{{ plot[1] }}" y2="{{ plot[1] + plot[3] }}" stroke="#b42318" stroke-width="1.5" stroke-dasharray="5 3"><title>{{ m.title }}</title></line>{% endfor %}
{% for l in c.lines %}<g class="series" data-series="{{ l.series }}">
<path class="series-line" d="{{ l.path }}" fill="none" stroke="{{ l.color }}" stroke-width="2"/>
{% for p in l.points %}{% if p.interval %}<line class="interval" x1="{{ p.x }}" x2="{{ p.x }}" y1="{{ p.interval[0] }}" y2="{{ p.interval[1] }}" stroke="{{ l.color }}" stroke-opacity="0.5"/>{% endif %}<circle cx="{{ p.x }}" cy="{{ p.y }}" r="3" fill="{{ l.color }}"><title>{{ p.title }}</title></circle>{% endfor %}
</g>{% endfor %}
</svg></figure>
{% else %}<p>No line-rate rows yet.</p>{% endfor %}
</div>
<p id="legend">{% for e in monitor.legend %}<span class="legend-entry"><svg width="14" height="10" aria-hidden="true"><rect width="14" height="10" fill="{{ e.color }}"/></svg> {{ e.label }}</span> {% endfor %}</p>
<h2>Versions side by side</h2>
<p class="muted">Per app and agent with more than one version, in the order the versions first appeared: each version's numbers with 95% intervals, its difference from the version before (an interval that excludes 0 is a change the data shows, not noise), and the finding codes whose rate (events with the finding per event) changed most.</p>
<div id="comparisons">
{% for cmp in monitor.comparisons %}
<table class="comparison" data-app="{{ cmp.app }}" data-agent="{{ cmp.agent }}">
<tr><th colspan="{{ cmp.versions|length + 1 }}">{{ cmp.app or "—" }} / {{ cmp.agent or "—" }}</th></tr>
<tr><th>version</th>{% for v in cmp.versions %}<th class="version">{{ v.version }}</th>{% endfor %}</tr>
<tr><td>seen</td>{% for v in cmp.versions %}<td>{{ v.first_seen }} – {{ v.last_seen }}</td>{% endfor %}</tr>
<tr><td>events (scored)</td>{% for v in cmp.versions %}<td>{{ v.events }} ({{ v.scored }})</td>{% endfor %}</tr>
<tr><td>mean Φ [95%]</td>{% for v in cmp.versions %}<td>{% if v.phi %}{{ "%.1f"|format(v.phi.value) }}{% if v.phi.lower is not none %} [{{ "%.1f"|format(v.phi.lower) }}, {{ "%.1f"|format(v.phi.upper) }}]{% endif %}{% else %}—{% endif %}{% if v.diff and v.diff.phi %}<br><span class="diff">Δ {{ "%+.1f"|format(v.diff.phi.value) }}{% if v.diff.phi.lower is not none %} [{{ "%+.1f"|format(v.diff.phi.lower) }}, {{ "%+.1f"|format(v.diff.phi.upper) }}]{% endif %} vs {{ v.diff.against }}</span>{% endif %}</td>{% endfor %}</tr>
<tr><td>flagged [95%]</td>{% for v in cmp.versions %}<td>{% if v.flagged %}{{ "%.1f"|format(v.flagged.value * 100) }}% [{{ "%.1f"|format(v.flagged.lower * 100) }}, {{ "%.1f"|format(v.flagged.upper * 100) }}]{% else %}—{% endif %}{% if v.diff and v.diff.flagged %}<br><span class="diff">Δ {{ "%+.1f"|format(v.diff.flagged.value * 100) }} pts [{{ "%+.1f"|format(v.diff.flagged.lower * 100) }}, {{ "%+.1f"|format(v.diff.flagged.upper * 100) }}]</span>{% endif %}</td>{% endfor %}</tr>
<tr><td>estimated correct [95%]</td>{% for v in cmp.versions %}<td>{% if v.correct %}{{ "%.1f"|format(v.correct.value * 100) }}%{% if v.correct.lower is not none %} [{{ "%.1f"|format(v.correct.lower * 100) }}, {{ "%.1f"|format(v.correct.upper * 100) }}]{% endif %} <span class="muted">{{ v.correct_source }}</span>{% else %}—{% endif %}{% if v.diff and v.diff.correct %}<br><span class="diff">Δ {{ "%+.1f"|format(v.diff.correct.value * 100) }} pts{% if v.diff.correct.lower is not none %} [{{ "%+.1f"|format(v.diff.correct.lower * 100) }}, {{ "%+.1f"|format(v.diff.correct.upper * 100) }}]{% endif %}</span>{% endif %}</td>{% endfor %}</tr>
<tr><td>findings that changed most</td>{% for v in cmp.versions %}<td class="finding-changes">{% for f in v.findings %}<code>{{ f.code }}</code> {% if f.before is not none %}{{ "%.0f"|format(f.before * 100) }}% → {% endif %}{{ "%.0f"|format(f.now * 100) }}%{% if not loop.last %}<br>{% endif %}{% else %}—{% endfor %}</td>{% endfor %}</tr>
</table>
{% else %}<p>No app has an agent with more than one version{% if filtered %} under these filters{% endif %}.</p>{% endfor %}
</div>
<h2>Where it goes wrong</h2>
<p class="muted">The last 7 days of the data against the 7 before: the tables, columns and question types (read from the question alone) of the events the line-rate verdict flags, ranked by the rise in flagged events. An event that reads three tables counts under each; the share flagged is over scored events, with its 95% interval; "new" marks what nothing read in the days before. The line is the daily share flagged over 14 days. Same numbers as <code>sqlgrade breakdown --since 7d</code>.</p>
<div id="where">
{% for t in where_wrong %}
<table class="where" data-by="{{ t.by }}">
<tr><th colspan="7">{{ t.title }}</th></tr>
<tr><th>{{ t.by }}</th><th>events</th><th>flagged [95%]</th><th>14 days</th><th>flagged before</th><th>change [95%]</th><th>top findings</th></tr>
{% for r in t.rows %}
<tr class="where-row" data-element="{{ r.element }}">
<td><a href="/queue?{{ r.queue }}">{{ r.label }}</a>{% if r.new %} <span class="changed new">new</span>{% endif %}</td>
<td>{{ r.events }}</td>
<td>{{ r.flagged }} · {{ r.share }}{% if r.interval %} <span class="muted">[{{ r.interval }}]</span>{% endif %}</td>
<td><svg class="sparkline" width="96" height="18" viewBox="0 0 96 18" role="img" aria-label="daily share flagged"><path d="{{ r.sparkline }}" fill="none" stroke="#b42318" stroke-width="1.5"/></svg></td>
<td>{{ r.flagged_before }}</td>
<td>{{ r.change or "—" }}</td>
<td>{{ r.findings or "—" }}</td>
</tr>
{% else %}<tr><td colspan="7">Nothing flagged{% if filtered %} under these filters{% endif %}.</td></tr>{% endfor %}
</table>
{% endfor %}
</div>
<h2>Series</h2>
<table id="series">
<tr><th>app</th><th>agent</th><th>version</th><th>events</th><th>scored</th><th>mean Φ</th><th>Φ distribution (0–100)</th><th>tiers (excellent / good / marginal / poor)</th><th>flagged</th><th>correct, line rate + people [95%]</th><th>correct, LLM + people [95%]</th><th>labelled</th><th>alerts</th><th></th></tr>
{% for s in series %}
<tr>
<td>{{ s.app or "—" }}</td><td>{{ s.agent or "—" }}</td><td>{{ s.version or "—" }}</td>
<td>{{ s.events }}</td><td>{{ s.scored }} ({{ pct(s.scored, s.events) }})</td>
<td>{% if s.phi_mean is not none %}{{ "%.1f"|format(s.phi_mean) }}{% else %}—{% endif %}</td>
<td>{% for n in s.phi_histogram %}<span class="bar" title="{{ loop.index0 * 10 }}–{{ loop.index0 * 10 + 10 }}: {{ n }}" style="width:{{ (n * 40 / (s.phi_histogram_max or 1))|int + 1 }}px"></span> {% endfor %}</td>
<td>{% for t in s.tiers %}{{ "%.0f"|format(t[1] * 100) }}%{% if not loop.last %} / {% endif %}{% endfor %}</td>
<td class="flagged">{% if s.line_correct_share is not none %}{{ "%.1f"|format(100 - s.line_correct_share * 100) }}%{% else %}—{% endif %}</td>
<td class="people-estimate">{% if s.people.estimate %}{{ "%.1f"|format(s.people.estimate.mean * 100) }}%{% if s.people.estimate.lower is not none %} [{{ "%.1f"|format(s.people.estimate.lower * 100) }}, {{ "%.1f"|format(s.people.estimate.upper * 100) }}]{% endif %} <span class="muted">{{ s.people.labelled }} labelled{% if s.people.census %}, every event{% endif %}</span>{% elif s.people.mean_p is not none %}{{ "%.1f"|format(s.people.mean_p * 100) }}% <span class="muted">model only, no labelled calibration events</span>{% else %}—{% endif %}</td>
<td>{% if s.estimate %}{{ "%.1f"|format(s.estimate.mean * 100) }}%{% if s.estimate.lower is not none %} [{{ "%.1f"|format(s.estimate.lower * 100) }}, {{ "%.1f"|format(s.estimate.upper * 100) }}]{% endif %} <span class="muted">n={{ s.uniform_events }}, {{ s.uniform_labelled }} human</span>{% else %}<span class="muted">no uniform slice</span>{% endif %}</td>
<td>{{ s.labelled }}</td>
<td>{% if s.firing_alerts %}<span class="firing">{{ s.firing_alerts }} firing</span>{% else %}—{% endif %}</td>
<td><a href="/queue?app={{ s.app|component }}&amp;agent={{ s.agent|component }}&amp;version={{ s.version|component }}">review</a></td>
</tr>
{% else %}<tr><td colspan="14">No rows yet.</td></tr>{% endfor %}
</table>
<h2>Alerts</h2>
<table id="alerts">
<tr><th>state</th><th>fired</th><th>series</th><th>metric</th><th>rule</th><th>baseline → observed</th><th>message</th><th></th></tr>
{% for a in alerts %}
<tr><td class="{{ a.state }}">{{ a.state }}</td><td>{{ a.fired }}</td><td>{{ a.series }}</td><td>{{ a.metric }}</td><td>{{ a.rule }}</td><td>{{ "%.3f"|format(a.baseline) }} → {{ "%.3f"|format(a.observed) }}</td><td>{{ a.message }}</td>
<td><a class="alert-events" href="/queue?alert={{ a.alert_id|component }}">its events</a></td></tr>
{% else %}<tr><td colspan="8">No alerts.</td></tr>{% endfor %}
</table>
<h2>Judges and their agreement with people</h2>
<p class="muted">Every judge identity that scored a series (line rate: sqlgrade and rule-profile versions; LLM: model, the model id the server reported, prompt and response mode). A judge that <span class="changed">replaced</span> another on a series is a judge change: its agreement starts afresh. Agreement: one pair per (event, reviewer) label beside the judge's verdict (the row's boolean verdict: on line-rate rows <code>p_correct</code> at or above the correctness model's threshold, whose version the identity names; on LLM rows correct/likely_correct; unsure left out); Cohen's κ with its 95% large-sample interval, accuracy with its 95% Wilson interval. "Calibration sample" counts only labels on the <a href="/queue?slice=calibration">calibration slice</a> ({{ calibration_per_week }} uniformly drawn events per judge and week): unbiased, unlike labels on events the queue ranks as informative.</p>
<table id="judges">
<tr><th>series</th><th>metric</th><th>judge identity</th><th>first seen</th><th>last seen</th><th>rows</th><th>labelled</th><th>κ [95%]</th><th>accuracy [95%]</th><th>calibration sample</th><th>per week (κ, labels)</th></tr>
{% for j in judges %}
<tr class="judge"><td>{{ j.series }}</td><td>{{ j.metric }}</td><td><code>{{ j.identity }}</code>{% if j.replaced_another %} <span class="changed">replaced</span>{% endif %}</td><td>{{ j.first_seen }}</td><td>{{ j.last_seen }}</td><td>{{ j.rows }}</td>
<td>{{ j.agreement.labelled }}</td>
<td>{% if j.agreement.kappa is not none %}{{ "%.2f"|format(j.agreement.kappa) }}{% if j.agreement.kappa_interval %} [{{ "%.2f"|format(j.agreement.kappa_interval[0]) }}, {{ "%.2f"|format(j.agreement.kappa_interval[1]) }}]{% endif %}{% else %}—{% endif %}</td>
<td>{% if j.agreement.accuracy is not none %}{{ "%.2f"|format(j.agreement.accuracy) }} [{{ "%.2f"|format(j.agreement.accuracy_interval[0]) }}, {{ "%.2f"|format(j.agreement.accuracy_interval[1]) }}]{% else %}—{% endif %}</td>
<td>{% if j.calibration.labelled %}{{ j.calibration.labelled }} labels{% if j.calibration.kappa is not none %}, κ {{ "%.2f"|format(j.calibration.kappa) }}{% endif %}{% else %}<span class="muted">none yet</span>{% endif %}</td>
<td>{% for w in j.weeks %}{{ w[0] }}: {% if w[1].kappa is not none %}{{ "%.2f"|format(w[1].kappa) }}{% else %}—{% endif %} ({{ w[1].labelled }}){% if not loop.last %}; {% endif %}{% endfor %}</td></tr>
{% else %}<tr><td colspan="11">No judge rows yet.</td></tr>{% endfor %}
</table>
<h2>Reliability of the line-rate p_correct</h2>
<p class="muted">On every labelled event with a line-rate row: per tenth of <code>p_correct</code>, the mean p against the share people called correct (majority of reviewers; unsure left out). On the diagonal, p means what it says; a model fitted on other labels may sit off it, which the estimate above corrects and <code>sqlgrade calibrate --fit</code> refits. {{ reliability.events }} labelled events{% if reliability.calibration_error is not none %}; calibration error {{ "%.3f"|format(reliability.calibration_error) }}, Brier {{ "%.3f"|format(reliability.brier) }}{% endif %}.</p>
<svg id="reliability" width="260" height="250" viewBox="0 0 260 250" role="img" aria-label="reliability plot: mean p_correct against the share people called correct">
<rect x="40" y="10" width="200" height="200" fill="#fff" stroke="#d6d9e0"/>
<line x1="40" y1="210" x2="240" y2="10" stroke="#9aa3b2" stroke-dasharray="4 3"/>
{% for t in [0, 0.5, 1] %}<text x="{{ 40 + t * 200 }}" y="226" font-size="11" text-anchor="middle">{{ t }}</text><text x="34" y="{{ 214 - t * 200 }}" font-size="11" text-anchor="end">{{ t }}</text>{% endfor %}
<text x="140" y="244" font-size="11" text-anchor="middle">mean p_correct</text>
<text x="12" y="110" font-size="11" text-anchor="middle" transform="rotate(-90 12 110)">share correct (people)</text>
{% for b in reliability.bins %}{% if b[0] > 0 %}<circle class="bin" cx="{{ "%.1f"|format(40 + b[1] * 200) }}" cy="{{ "%.1f"|format(210 - b[2] * 200) }}" r="{{ "%.1f"|format([3 + b[0] ** 0.5, 12]|min) }}" fill="#5b7bd5" fill-opacity="0.6"><title>p {{ "%.2f"|format(b[1]) }}: {{ "%.0f"|format(b[2] * 100) }}% correct of {{ b[0] }}</title></circle>{% endif %}{% endfor %}
</svg>
<table id="reliability-bins"><tr><th>p_correct</th><th>events</th><th>mean p</th><th>share correct</th></tr>
{% for b in reliability.bins %}{% if b[0] > 0 %}<tr><td>{{ "%.1f"|format(loop.index0 / 10) }}–{{ "%.1f"|format(loop.index / 10) }}</td><td>{{ b[0] }}</td><td>{{ "%.2f"|format(b[1]) }}</td><td>{{ "%.2f"|format(b[2]) }}</td></tr>{% endif %}{% else %}<tr><td colspan="4">No labels yet.</td></tr>{% endfor %}
</table>
<h2>Judge disagreement</h2>
<p class="muted">Share of LLM-judged events whose verdict (correct or not) differs from the line-rate verdict it revises, with its 95% Wilson interval: a cheap early warning that either judge changed.</p>
<table id="disagreement">
<tr><th>series</th><th>judged</th><th>disagree</th><th>share [95%]</th><th>per week (share, judged)</th></tr>
{% for d in disagreement %}
<tr><td>{{ d.series }}</td><td>{{ d.judged }}</td><td>{{ d.disagree }}</td><td>{% if d.share is not none %}{{ "%.1f"|format(d.share * 100) }}% [{{ "%.1f"|format(d.interval[0] * 100) }}, {{ "%.1f"|format(d.interval[1] * 100) }}]{% else %}—{% endif %}</td>
<td>{% for w in d.weeks %}{{ w[0] }}: {{ "%.1f"|format(w[2] * 100) }}% ({{ w[1] }}){% if not loop.last %}; {% endif %}{% endfor %}</td></tr>
{% else %}<tr><td colspan="5">No LLM-judged events yet.</td></tr>{% endfor %}
</table>
{% endblock %}"##;

const QUEUE: &str = r#"{% extends "layout.html" %}
{% block title %}sqlgrade review — queue{% endblock %}
{% block body %}
<h1>Review queue</h1>
<form method="get" action="/queue">
app <input name="app" value="{{ filter.app }}" size="10"> agent <input name="agent" value="{{ filter.agent }}" size="10">
version <input name="version" value="{{ filter.version }}" size="8"> metric <input name="metric" value="{{ filter.metric }}" size="8">
alert <input name="alert" value="{{ filter.alert }}" size="14"> hide labelled by <input name="reviewer" value="{{ filter.reviewer }}" size="10">
<label><input type="checkbox" name="slice" value="calibration"{% if filter.slice == "calibration" %} checked{% endif %}> calibration sample only</label>
<button type="submit">filter</button></form>
{% if filter.slice == "calibration" %}<p class="muted" id="calibration-note">Calibration slice: events drawn uniformly per judge identity and week that nobody has labelled yet. Label these first: agreement measured on them is unbiased.</p>{% endif %}
<p class="muted">Ordered by how informative a label would be: judges that disagree first, then low confidence and events in a firing alert's window; newest first within a priority. {{ items|length }} events shown.</p>
<table id="queue">
<tr><th>#</th><th>event</th><th>time</th><th>series</th><th>Φ</th><th>tier</th><th>why</th><th>labels</th><th>question</th></tr>
{% for i in items %}
<tr><td>{{ loop.index }}</td><td><a class="event-link" href="/event/{{ i.event_id|component }}?{{ query }}">{{ i.event_id }}</a></td><td>{{ i.ts }}</td>
<td>{{ i.app }} / {{ i.agent }} / {{ i.version }}</td><td>{% if i.phi is not none %}{{ "%.1f"|format(i.phi) }}{% else %}—{% endif %}</td><td>{{ i.tier or "—" }}</td>
<td>{% for r in i.reasons %}<span class="reason">{{ r }}</span>{% endfor %}</td><td>{{ i.labels }}</td><td>{{ questions[i.event_id] or "" }}</td></tr>
{% else %}<tr><td colspan="9">Nothing to review with this filter.</td></tr>{% endfor %}
</table>
{% endblock %}"#;

const EVENT: &str = r#"{% extends "layout.html" %}
{% block title %}sqlgrade review — {{ event_id }}{% endblock %}
{% block body %}
{% if message %}<p class="msg" id="message">{{ message }}</p>{% endif %}
{% if error %}<p class="err" id="error">{{ error }}</p>{% endif %}
<h1>Event <code id="event-id">{{ event_id }}</code></h1>
<p><a id="back-to-queue" href="/queue?{{ query }}">← queue</a>{% if next_id %} · <a id="next-event" href="/event/{{ next_id|component }}?{{ query }}">next event →</a>{% endif %}</p>
{% if inputs %}
<p class="muted">{{ inputs.ts }} · {{ inputs.app_id or "—" }} / {{ inputs.agent_id or "—" }} / {{ inputs.agent_version or "—" }}{% if inputs.model %} · {{ inputs.model }}{% endif %}{% if inputs.run_id %} · run {{ inputs.run_id }}{% endif %}</p>
<h2>Question</h2><pre id="question">{{ inputs.question }}</pre>
<h2>Enriched question</h2><pre id="enriched">{{ inputs.enriched_question or "(none)" }}</pre>
<h2>SQL</h2><pre id="sql">{{ inputs.sql }}</pre>
{% if inputs.gold_sql %}<h2>Gold SQL</h2><pre id="gold-sql">{{ inputs.gold_sql }}</pre>{% endif %}
{% if inputs.result %}<h2>Result (the agent's run)</h2>
{% if inputs.result.error %}<pre id="result-error" class="err">{{ inputs.result.error }}</pre>
{% else %}<p class="muted" id="result-shape">{% if inputs.result.row_count is not none %}{{ inputs.result.row_count }} row(s){% else %}row count not given{% endif %}{% if inputs.result.truncated %} · sample of {{ inputs.result.rows|length }}{% endif %}{% if inputs.result.elapsed_ms is not none %} · {{ inputs.result.elapsed_ms }} ms{% endif %}</p>
{% if inputs.result.rows %}<table id="result-rows">{% if inputs.result.columns %}<tr>{% for c in inputs.result.columns %}<th>{{ c }}</th>{% endfor %}</tr>{% endif %}
{% for row in inputs.result.rows[:20] %}<tr>{% for cell in row %}<td>{{ "NULL" if cell is none else cell }}</td>{% endfor %}</tr>{% endfor %}</table>
{% if inputs.result.rows|length > 20 %}<p class="muted">first 20 of the {{ inputs.result.rows|length }} sampled rows</p>{% endif %}{% endif %}
{% endif %}{% endif %}
{% else %}<p class="muted">The inputs of this event were not stored (<code>[sink] store_inputs = false</code>, or rows written before it existed).</p>{% endif %}
<h2>Label</h2>
<form class="label" method="post" action="/label">
<input type="hidden" name="event_id" value="{{ event_id }}"><input type="hidden" name="query" value="{{ query }}">
reviewer <input id="reviewer" name="reviewer" value="{{ reviewer }}" size="14" required maxlength="100">
category <select name="category" id="category"><option value="">—</option>{% for c in categories %}<option value="{{ c }}">{{ c }}</option>{% endfor %}</select>
note <input name="note" id="note" size="40" maxlength="4000"><br><br>
<button id="label-correct" name="verdict" value="correct" type="submit">✓ correct (c)</button>
<button id="label-incorrect" name="verdict" value="incorrect" type="submit">✗ incorrect (x)</button>
<button id="label-unsure" name="verdict" value="unsure" type="submit">? unsure (u)</button>
</form>
{% if labels %}<table id="labels"><tr><th>reviewer</th><th>verdict</th><th>category</th><th>note</th><th>when</th></tr>
{% for l in labels %}<tr><td>{{ l.reviewer }}</td><td>{{ l.verdict }}</td><td>{{ l.category or "" }}</td><td>{{ l.note or "" }}</td><td>{{ l.labelled_at }}</td></tr>{% endfor %}</table>{% endif %}
<h2>Scores</h2>
<table id="rows"><tr><th>metric</th><th>value</th><th>verdict</th><th>status</th><th>components</th></tr>
{% for r in rows %}
<tr><td>{{ r.metric }}</td><td>{{ "%.3f"|format(r.value) if r.metric not in points_metrics else "%.1f"|format(r.value) }}</td>
<td>{% if r.verdict is not none %}{{ "true" if r.verdict else "false" }}{% else %}{{ r.semantic_verdict or "—" }}{% endif %}{% if r.p_correct is not none %}<br><span class="p-correct">p_correct {{ "%.2f"|format(r.p_correct) }}</span>{% endif %}</td><td>{{ r.status }}</td>
<td>{% if r.quality_tier %}tier {{ r.quality_tier }} · filters {{ r.filter_status }} · verdict {{ r.semantic_verdict }} · confidence {{ r.confidence_tier }}{% if r.confidence is not none %} ({{ "%.2f"|format(r.confidence) }}){% endif %} · enrichment {{ r.enrichment_status }} · judge {{ r.judge }}{% if r.judge_identity %} (<code class="judge-identity">{{ r.judge_identity }}</code>){% endif %}{% if r.rules_fired %} · rules {{ r.rules_fired|join(", ") }}{% endif %}{% endif %}
{% if r.selection %}<br>selected: {{ r.selection }}{% if r.inclusion_probability is not none %} (p = {{ r.inclusion_probability }}){% endif %} · revises Φ {{ r.revised_value }} / {{ r.revised_verdict }}{% endif %}</td></tr>
{% if r.metric == line_metric and contributions %}<tr><td></td><td colspan="4" id="contributions">why p_correct is {{ "%.2f"|format(r.p_correct or 0) }} (log-odds from the intercept {{ "%+.2f"|format(model_intercept) }}, threshold {{ "%.2f"|format(model_threshold) }}; model <code>{{ model_version }}</code>{% if model_note %}, {{ model_note }}{% endif %}): {% for c in contributions %}<span class="reason contribution"><code>{{ c.feature }}</code>{% if c.value != 1 %} = {{ c.value }}{% endif %} {{ "%+.2f"|format(c.log_odds) }}</span>{% endfor %}</td></tr>{% endif %}
<tr><td></td><td colspan="4">{{ details[loop.index0]|safe }}</td></tr>
{% endfor %}
</table>
<details><summary>Raw JSON</summary><pre id="raw">{{ raw }}</pre></details>
{% endblock %}"#;

const MESSAGE: &str = r#"{% extends "layout.html" %}
{% block body %}<h1>{{ title }}</h1><p>{{ text }}</p><p><a href="/">overview</a> · <a href="/queue">queue</a></p>{% endblock %}"#;

/// The template environment (HTML auto-escaping on for every `.html` template).
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    for (name, source) in [
        ("layout.html", LAYOUT),
        ("overview.html", OVERVIEW),
        ("queue.html", QUEUE),
        ("event.html", EVENT),
        ("message.html", MESSAGE),
    ] {
        // The templates are constants of this file; a unit test renders each one.
        if let Err(e) = env.add_template(name, source) {
            tracing::error!(template = name, error = %e, "review template does not compile");
        }
    }
    // A link's path segment or query value: every reserved character encoded, `/` included
    // (minijinja's `urlencode` keeps `/`, which split an event id like `app/42` in two).
    env.add_filter("component", |text: String| {
        crate::review::url_component(&text)
    });
    env.add_function("pct", |part: f64, whole: f64| -> String {
        if whole > 0.0 {
            format!("{:.0}%", 100.0 * part / whole)
        } else {
            "—".to_string()
        }
    });
    env
}

/// A metric's `details` rendered for people, as HTML in which every string is escaped: objects
/// become definition lists, arrays of objects tables (findings, counterexample rows),
/// multi-line strings preformatted blocks (a counterexample's script).
pub fn details_html(details: &Value) -> String {
    let mut out = String::new();
    match details {
        // What a person reads first: the findings, the judge's rationale, a counterexample.
        Value::Object(map) if !map.is_empty() => {
            const FIRST: [&str; 3] = ["findings", "rationale", "counterexample"];
            let keys = FIRST
                .iter()
                .copied()
                .filter(|k| map.contains_key(*k))
                .chain(
                    map.keys()
                        .map(String::as_str)
                        .filter(|k| !FIRST.contains(k)),
                );
            out.push_str("<dl class=\"d\">");
            for key in keys {
                use std::fmt::Write as _;
                let _ = write!(out, "<dt>{}</dt><dd>", HtmlEscape(key));
                render(&map[key], &mut out, 1);
                out.push_str("</dd>");
            }
            out.push_str("</dl>");
        }
        other => render(other, &mut out, 0),
    }
    out
}

fn render(value: &Value, out: &mut String, depth: usize) {
    use std::fmt::Write as _;
    if depth > 8 {
        out.push('…');
        return;
    }
    match value {
        Value::Null => out.push('—'),
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) if s.contains('\n') => {
            let _ = write!(out, "<pre>{}</pre>", HtmlEscape(s));
        }
        Value::String(s) => {
            let _ = write!(out, "{}", HtmlEscape(s));
        }
        Value::Array(items) if items.is_empty() => {
            out.push_str("<span class=\"muted\">none</span>")
        }
        Value::Array(items) if items.iter().all(Value::is_object) => {
            let mut columns: Vec<&str> = Vec::new();
            for item in items {
                if let Value::Object(map) = item {
                    for key in map.keys() {
                        if !columns.contains(&key.as_str()) {
                            columns.push(key);
                        }
                    }
                }
            }
            out.push_str("<table><tr>");
            for c in &columns {
                let _ = write!(out, "<th>{}</th>", HtmlEscape(c));
            }
            out.push_str("</tr>");
            for item in items.iter().take(200) {
                out.push_str("<tr>");
                for c in &columns {
                    out.push_str("<td>");
                    render(item.get(*c).unwrap_or(&Value::Null), out, depth + 1);
                    out.push_str("</td>");
                }
                out.push_str("</tr>");
            }
            out.push_str("</table>");
        }
        Value::Array(items) => {
            for (i, item) in items.iter().take(200).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                render(item, out, depth + 1);
            }
        }
        Value::Object(map) if map.is_empty() => out.push_str("<span class=\"muted\">—</span>"),
        Value::Object(map) => {
            out.push_str("<dl class=\"d\">");
            for (key, v) in map {
                let _ = write!(out, "<dt>{}</dt><dd>", HtmlEscape(key));
                render(v, out, depth + 1);
                out.push_str("</dd>");
            }
            out.push_str("</dl>");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_escape_every_string_and_key() {
        let html = details_html(&serde_json::json!({
            "<b>key": "<script>alert(1)</script>",
            "findings": [{"code": "x", "message": "a < b & \"c\""}],
            "script": "line1\n<img src=x onerror=alert(1)>",
        }));
        assert!(!html.contains("<script>"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(!html.contains("<b>key"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(html.contains("<table>"), "{html}");
        assert!(
            html.find("findings") < html.find("script"),
            "findings come first: {html}"
        );
    }

    #[test]
    fn every_template_compiles_and_escapes() {
        let env = environment();
        for name in [
            "layout.html",
            "overview.html",
            "queue.html",
            "event.html",
            "message.html",
        ] {
            assert!(env.get_template(name).is_ok(), "{name}");
        }
        let page = env
            .get_template("message.html")
            .unwrap()
            .render(
                minijinja::context! { title => "<script>x</script>", text => "a&b", source => "s" },
            )
            .unwrap();
        assert!(page.contains("&lt;script&gt;x&lt;"), "{page}");
        assert!(!page.contains("<script>x"), "{page}");
    }
}
