"""The executor's durable memory in Redis: the highest planner epoch seen and each command's
outcome, so that a command is applied at most once and a stale planner is refused.

KEYS (hash tag `{<cluster_name>}` as in `state.controller_store`, so one script sees them all):
- `reassigner:{c}:executor:epoch` — highest planner epoch seen (integer text);
- `reassigner:{c}:executor:command:<id>` — `APPLYING:<token of the claiming attempt>`, then the
  JSON of the published outcome (kept 7 days: the pipeline re-publishes an outbox within
  minutes, not weeks);
- `reassigner:{c}:executor:throttles` — HASH of the replication throttles the executor set
  (`reassigner.edge.throttles`: field `broker:<id>:<config>` or `topic:<topic>:<list>:<entry>`,
  value the JSON of what it set, what was there before and the step sequence it serves), so
  that a clear removes only those, and the mark of the last write (THROTTLE RECORDS); also the
  cordons it set (`reassigner.edge.cordons`: field `cordon:<id>`, which the throttle rules never
  read). No expiry: a record is dropped when its throttle or cordon is removed.

RULES (`claim` is one Lua script, atomic):
- an id seen before is not applied again: DUPLICATE with what is stored — unless the stored
  claim carries this attempt's token (a claim whose reply was lost, retried): APPLY again;
- an epoch above the planner epoch the controller store holds (`reassigner:{c}:meta` field
  `epoch`, bumped by each pipeline instance as it starts) is UNKNOWN: no pipeline issued it (a
  forged command, or one written for another cluster's state). It changes nothing, so it
  cannot raise the highest epoch and make every real command STALE (one forged command with
  epoch 1,000,000 would otherwise stop the product for good);
- an epoch older than the highest seen is STALE; otherwise the highest is raised and the id is
  marked APPLYING with the token.

NO PLANNER: a claim while the planner meta holds no epoch at all is NO_PLANNER (the store was
emptied, or no pipeline has run on it yet): the executor waits for the pipeline to write it
(`Executor.claim`) rather than refuse a genuine command.

THROTTLE RECORDS are verified, not trusted: the executor keeps its own copy of the records
(read from Redis the first time it needs them) and marks every write to the hash (field
`~written` = this process's token and a write count; one Lua script checks the mark it last
wrote and moves it on). A mark that is not its own means Redis lost the records or was
restored from an older copy: the executor says so in one ERROR log line and writes its copy
back whole — so a throttle it set is never forgotten and left behind, and one it cleared is
never "restored" by a clear. A first read that finds nothing at all (`found_nothing`) cannot
tell an emptied store from one no executor throttled on: the executor then adopts what its
recent steps set, as Kafka shows it (`reassigner.edge.throttles`, ADOPTION).

REPLAYS: an id is remembered for `RESULT_TTL_SECONDS` after its outcome is stored, so a replay of
a command inside that window is a DUPLICATE (its stored result is published again, nothing is
applied). Past it the id is forgotten, and a replay of the same bytes — with the same valid
signature, if commands are signed — would be applied again (until a pipeline restart makes its
epoch STALE). So the executor refuses, before claiming, any command whose `event_time` is more
than `REPLAY_WINDOW_SECONDS` old (`COMMAND_EXPIRED`): one day less than the memory, which leaves
a day for the clocks of the pipeline's and the executor's hosts to disagree. (The same hole
opened without any attacker: an executor down for over a week whose consumer group offsets had
expired re-read the commands topic from its start.)
Redis errors reach the caller untranslated; the executor calls through
`runtime.clients.redis_io.retry_redis`.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass

from state.controller_store import (ControllerStore, as_text, key_prefix, read_signing_announcements,
                                    store_signing_announcement)

log = logging.getLogger(__name__)

RESULT_TTL_SECONDS = 7 * 24 * 3600
# The throttle records' hash carries this field: the mark of the executor's last write to it.
THROTTLES_MARK = "~written"
REPLAY_WINDOW_SECONDS = RESULT_TTL_SECONDS - 24 * 3600

CLAIM_COMMAND = """
local existing = redis.call('GET', KEYS[2])
if existing == 'APPLYING:' .. ARGV[3] then return {'APPLY', redis.call('GET', KEYS[1]) or '-1'} end
if existing then return {'DUPLICATE', existing} end
local highest = tonumber(redis.call('GET', KEYS[1]) or '-1')
local epoch = tonumber(ARGV[1])
local stored = redis.call('HGET', KEYS[3], 'epoch')
if not stored then return {'NO_PLANNER', '0'} end
local planner = tonumber(stored)
if epoch > planner then return {'UNKNOWN', tostring(planner)} end
if epoch < highest then return {'STALE', tostring(highest)} end
if epoch > highest then redis.call('SET', KEYS[1], ARGV[1]) end
redis.call('SET', KEYS[2], 'APPLYING:' .. ARGV[3], 'EX', ARGV[2])
return {'APPLY', tostring(highest)}
"""


# A write to the throttle records that first checks the mark of the executor's last write
# (ARGV[1]) and moves it on (ARGV[2]); ARGV[3] = JSON list of fields to delete, ARGV[4] = JSON
# flat list of fields and values to set. 0 (nothing written) when the mark is not the one given.
WRITE_THROTTLES = """
if (redis.call('HGET', KEYS[1], ARGV[5]) or '') ~= ARGV[1] then return 0 end
local gone = cjson.decode(ARGV[3])
if #gone > 0 then redis.call('HDEL', KEYS[1], unpack(gone)) end
local set = cjson.decode(ARGV[4])
if #set > 0 then redis.call('HSET', KEYS[1], unpack(set)) end
redis.call('HSET', KEYS[1], ARGV[5], ARGV[2])
return 1
"""


@dataclass(frozen=True)
class Outcome:
    """The result of one command, as published."""

    ok: bool
    error_code: str | None = None
    message: str = ""

    def to_storage(self) -> str:
        return json.dumps({"ok": self.ok, "error_code": self.error_code, "message": self.message})

    @classmethod
    def from_storage(cls, text: str) -> "Outcome":
        data = json.loads(text)
        return cls(bool(data["ok"]), data.get("error_code"), data.get("message", ""))


class CommandLedger:
    """The executor's durable memory in Redis: highest epoch and the outcome per command id."""

    def __init__(self, client, cluster_name: str) -> None:
        self.client = client
        self.cluster_name = cluster_name
        self.prefix = f"{key_prefix(cluster_name)}:executor"
        self.planner_epoch_key = ControllerStore.meta_key(cluster_name)
        self._claim = client.register_script(CLAIM_COMMAND)
        self._write = client.register_script(WRITE_THROTTLES)
        self._throttles: dict[str, str] | None = None  # this process's copy of the records (JSON each)
        self.found_nothing = False  # its first read found no record and no mark (ADOPTION)
        self._mark = ""  # the mark of the last write to them it saw or made
        self._token = uuid.uuid4().hex[:12]
        self._writes = 0

    def _command_key(self, command_id: str) -> str:
        return f"{self.prefix}:command:{command_id}"

    def claim(self, command_id: str, epoch: int, token: str) -> tuple[str, str]:
        """('APPLY', highest before) | ('DUPLICATE', stored value) | ('STALE', highest) |
        ('UNKNOWN', the planner epoch). `token` names this attempt: the same claim made again
        with it is APPLY again."""
        verdict, detail = self._claim(keys=[f"{self.prefix}:epoch", self._command_key(command_id),
                                            self.planner_epoch_key],
                                      args=[epoch, RESULT_TTL_SECONDS, token])
        return as_text(verdict), as_text(detail)

    def store_outcome(self, command_id: str, outcome: Outcome) -> None:
        self.client.set(self._command_key(command_id), outcome.to_storage(), ex=RESULT_TTL_SECONDS)

    def highest_epoch(self) -> int:
        value = self.client.get(f"{self.prefix}:epoch")
        return int(value) if value is not None else -1

    def _throttles_key(self) -> str:
        return f"{self.prefix}:throttles"

    def read_throttles(self) -> dict[str, dict]:
        """The throttles the executor set and has not cleared: field → record (THROTTLE RECORDS:
        from Redis the first time, then this process's own copy, Redis checked against it)."""
        stored = {as_text(k): as_text(v) for k, v in self.client.hgetall(self._throttles_key()).items()}
        mark = stored.pop(THROTTLES_MARK, "")
        if self._throttles is None:  # the first read of this process: Redis is all there is
            self._throttles = stored
            self._mark = mark
            self.found_nothing = not stored and not mark
        elif mark != self._mark:
            self._rewrite_throttles(f"its mark is {mark or 'gone'}, not {self._mark or 'absent'}")
        return {field: json.loads(value) for field, value in self._throttles.items()}

    def store_throttles(self, records: dict[str, dict]) -> None:
        """Record throttles as the executor's own (before it writes them to Kafka)."""
        if records:
            self._write_throttles({k: json.dumps(v, sort_keys=True, separators=(",", ":"))
                                   for k, v in records.items()}, [])

    def forget_throttles(self, fields) -> None:
        """Drop the records of throttles that were cleared (after Kafka took the clear)."""
        fields = list(fields)
        if fields:
            self._write_throttles({}, fields)

    def _write_throttles(self, records: dict[str, str], gone: list[str]) -> None:
        if self._throttles is None:
            self.read_throttles()
        mark = f"{self._token}:{self._writes + 1}"
        written = self._write(keys=[self._throttles_key()], args=[
            self._mark, mark, json.dumps(gone), json.dumps([x for kv in records.items() for x in kv]),
            THROTTLES_MARK])
        self._throttles = {**{k: v for k, v in self._throttles.items() if k not in gone}, **records}
        self._writes += 1
        if int(written):
            self._mark = mark
        else:
            self._rewrite_throttles("its mark is not the one of the executor's last write")

    def _rewrite_throttles(self, why: str) -> None:
        """The records in Redis are not those this process wrote (emptied, or restored from an
        older copy): write its own copy in their place, whole."""
        log.error("the executor's throttle records in Redis are not the ones it wrote (%s: the store was emptied "
                  "or restored from an older copy): rewriting its own %d records", why, len(self._throttles or {}))
        self._writes += 1
        mark = f"{self._token}:{self._writes}"
        with self.client.pipeline(transaction=True) as pipe:
            pipe.delete(self._throttles_key())
            pipe.hset(self._throttles_key(), mapping={**(self._throttles or {}), THROTTLES_MARK: mark})
            pipe.execute()
        self._mark = mark

    def read_signing(self) -> dict[str, str]:
        """The command signing the pipeline and the executor recorded as they started."""
        return read_signing_announcements(self.client, self.cluster_name)

    def store_signing(self, announced: str) -> None:
        """Record this executor's command signing: a key fingerprint, or "unsigned"."""
        store_signing_announcement(self.client, self.cluster_name, "executor", announced)
