"""Sizes and durations as people read them: one rule for every screen that shows them — the
terminal tables (`reassigner.operator.tables`), `reassigner simulate`, and the status page,
whose script gets the same rule in JavaScript (`UNITS_JS`, built from the same constants).

- a size counts in decimal units (1 KB = 1000 B, as Kafka's tools and disk makers count): whole
  bytes below 1 KB ("512 B"), then one decimal ("28.1 MB", "1,204.8 TB"), thousands grouped;
- a duration is rounded to the second: "42 s", then "3 min 26 s", from an hour "2 h 05 min"
  (the smaller unit on two digits);
- an unknown value (None) is "?".

Exact counts (`bytes to move: 2,000,000`) are numbers, not sizes: they are printed as such.
Pure.
"""

from __future__ import annotations

import json

SIZE_UNITS = ("B", "KB", "MB", "GB", "TB")
SIZE_STEP = 1000
UNKNOWN = "?"


def format_size(value: float | None) -> str:
    """Bytes → "28.1 MB"."""
    if value is None:
        return UNKNOWN
    for unit in SIZE_UNITS:
        if abs(value) < SIZE_STEP or unit == SIZE_UNITS[-1]:
            return f"{value:,.0f} {unit}" if unit == SIZE_UNITS[0] else f"{value:,.1f} {unit}"
        value /= SIZE_STEP
    return UNKNOWN


def format_rate(bytes_per_second: float | None) -> str:
    """Bytes per second → "2.1 MB/s"."""
    return UNKNOWN if bytes_per_second is None else f"{format_size(bytes_per_second)}/s"


def format_duration(seconds: float | None) -> str:
    """Seconds → "42 s", "3 min 26 s", "2 h 05 min"."""
    if seconds is None:
        return UNKNOWN
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


UNITS_JS = f"""const size = v => {{
  if (v === null || v === undefined) return {json.dumps(UNKNOWN)};
  const units = {json.dumps(list(SIZE_UNITS))};
  let i = 0;
  while (Math.abs(v) >= {SIZE_STEP} && i < units.length - 1) {{ v /= {SIZE_STEP}; i++; }}
  const digits = i ? 1 : 0;
  return v.toLocaleString("en-US", {{minimumFractionDigits: digits, maximumFractionDigits: digits}}) + " " + units[i];
}};
const duration = v => {{
  if (v === null || v === undefined) return {json.dumps(UNKNOWN)};
  const s = Math.round(v), two = n => String(n).padStart(2, "0");
  if (s < 60) return s + " s";
  const m = Math.floor(s / 60);
  return m < 60 ? m + " min " + two(s % 60) + " s" : Math.floor(m / 60) + " h " + two(m % 60) + " min";
}};"""
"""`size` and `duration` for the status page's script: `format_size` and `format_duration`."""
