"""The stack contract: what a stack plugin gives the core, and what it gets back.

A stack provides an `Implementations` resolver (a spec resolved once: absent and not asked
for -> skip; absent but named as a paired run's side, or broken -> fail naming it), a session
store of sweeps over `measure.pooling.JobPool` (get, more, paired rounds; the canary applied by
the candidate's store only) and `records(sweep)`. It gets, from `judge_point`, adaptive repeats,
paired A/B verdicts and the JUnit and report rows of `hpc_record`:

    judge_point(hpc_record, Point(get=..., more=..., cost=..., paired=None or ...),
                records, failures=(SweepFailed,))

A whole toy stack on this module alone: tests/contract/toy_stack.py. Why and how to add a stack:
docs/explanation/architecture.md ("The stack contract").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

import pytest

from pytest_hpccomm.baselines.adaptive import until_decided
from pytest_hpccomm.baselines.result import BASE_FINGERPRINT
from pytest_hpccomm.cache import python_in
from pytest_hpccomm.cluster.placement import placement_reason
from pytest_hpccomm.config import assignments
from pytest_hpccomm.errors import Broken, Unavailable
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.measure.pooling import JobPool
from pytest_hpccomm.proc.cpu_share import Guarded, QuietRetry
from pytest_hpccomm.record import Record
from pytest_hpccomm.session import HpcSession, hpc_session_of

E = TypeVar("E")
S = TypeVar("S")


def _own_fingerprint(sweep: Any) -> Mapping[str, Any]:
    """A sweep's own `fingerprint` (most stores' sweeps carry one)."""
    return cast(Mapping[str, Any], sweep.fingerprint)


BASE_FLAG, CANDIDATE_FLAG = "--hpc-base", "--hpc-candidate"


class Implementations(Generic[E]):
    """spec -> E, resolved once per process (`resolve(spec)`); what it raised is kept too, so
    every item of an implementation that failed to resolve reports the same reason without
    resolving again."""

    def __init__(
        self,
        resolve: Callable[[str], E],
        unavailable: tuple[type[Exception], ...] = (Unavailable,),
        broken: tuple[type[Exception], ...] = (Broken,),
    ) -> None:
        self.resolve, self.unavailable, self.broken = resolve, unavailable, broken
        self._got: dict[str, E | Exception] = {}

    def peek(self, spec: str) -> E | Exception:
        """The implementation, or what resolving it raised (no skip, no failure): what a
        forecast (pytest_hpccomm_foreseen_skip) reads."""
        if spec not in self._got:
            try:
                self._got[spec] = self.resolve(spec)
            except self.unavailable + self.broken as exc:
                self._got[spec] = exc
        return self._got[spec]

    def skip_reason(self, spec: str) -> str | None:
        """The skip an item of `spec` would make for it (unavailable here), or None."""
        got = self.peek(spec)
        return str(got) if isinstance(got, self.unavailable) else None

    def __call__(self, spec: str, named_by: str | None = None) -> E:
        """The implementation; `named_by`: the option that named it as a side of a paired run
        (an absent side then fails the item: the user asked for it)."""
        got = self.peek(spec)
        if isinstance(got, self.unavailable):
            if named_by is None:
                pytest.skip(str(got))
            pytest.fail(f"{named_by}: {got}", pytrace=False)
        if isinstance(got, Exception):
            pytest.fail(str(got), pytrace=False)
        return got

    def under_test(self, hpc_session: HpcSession, stack: str, spec: str) -> E:
        """What the items test: `spec` (the stack's own option), or a paired run's candidate."""
        paired = sides(hpc_session, stack)
        return self(spec) if paired is None else self(paired[1], f"{CANDIDATE_FLAG} {stack}")

    def base(self, hpc_session: HpcSession, stack: str) -> E | None:
        """A paired run's base side (None: not a paired run of `stack`)."""
        paired = sides(hpc_session, stack)
        return None if paired is None else self(paired[0], f"{BASE_FLAG} {stack}")

    def forget(self) -> None:
        """Resolve every spec again (tests that change what a spec resolves to)."""
        self._got.clear()


def stack_params(item: pytest.Item, stack: str) -> dict[str, Any] | None:
    """An item's parameters when it is one of `stack`'s (its stack marker), else None: what a
    stack's pytest_hpccomm_foreseen_skip reads."""
    mark = item.get_closest_marker("stack")
    if mark is None or mark.args[:1] != (stack,):
        return None
    callspec = getattr(item, "callspec", None)
    return dict(callspec.params) if callspec is not None else {}


def foreseen_placement(item: pytest.Item, stack: str) -> str | None:
    """For a stack whose every placed item skips where the placement cannot carry the fabric
    (cluster.placement.placement_reason): that reason for one of its items, foreseen."""
    params = stack_params(item, stack)
    placement = None if params is None else params.get("hpc_placement")
    if placement is None or not item.config.pluginmanager.has_plugin("hpccomm"):
        return None
    return placement_reason(str(placement), hpc_session_of(item.config).selection)


def sides(hpc_session: HpcSession, stack: str) -> tuple[str, str] | None:
    """(base, candidate) specs when this session is a paired A/B run of `stack`."""
    return hpc_session.cfg.paired(stack)


def named_in_pair(config: pytest.Config, stack: str) -> bool:
    """Whether --hpc-candidate names `stack` (read from the options, for a stack probe, which
    runs while the session is being opened)."""
    if not config.pluginmanager.has_plugin("hpccomm"):
        return False
    items = config.getoption("hpc_candidate", None) or config.getini("hpc_candidate") or []
    return stack in assignments("--hpc-candidate", [str(item) for item in items])


@dataclass(frozen=True)
class Releases:
    """A Python-environment stack's releases by name (`tensorflow-cpu==2.20.0`), each made
    into its venv on first use: what check_python_specs takes besides a Python and the
    keywords."""

    form: str  # what one is written as, for messages: "tensorflow-cpu==VERSION"
    written: Callable[[str], bool]  # whether a spec is written as one (well formed or not)
    error: Callable[[str], str | None]  # why it is none the index has (a usage error), or None


def check_python_specs(
    config: pytest.Config,
    stack: str,
    option: str,
    value: str,
    what: str,
    keywords: tuple[str, str],
    releases: Releases | None = None,
) -> None:
    """The stack's implementation option, or a paired run's two sides: each a Python (or its
    venv) that has `what`, one of `keywords` (build, none; `none` is no side), or one of the
    stack's `releases` (a malformed one, or one the index lacks, named by `releases.error`).
    What cannot be one is a usage error naming the option; so is the option beside the two
    sides (a third implementation)."""
    build, none = keywords
    specs = [(option, value)]
    paired = (
        sides(hpc_session_of(config), stack) if config.pluginmanager.has_plugin("hpccomm") else None
    )
    if paired is not None:
        given = config.getoption(option.lstrip("-").replace("-", "_"), None)
        if given is not None and not hpc_session_of(config).cfg.tested_by_option(stack, given):
            raise pytest.UsageError(
                f"{option} cannot be combined with a paired A/B run of {stack}: "
                f"{BASE_FLAG}/{CANDIDATE_FLAG} {stack}=... name the two sides"
            )
        specs = [(f"{BASE_FLAG} {stack}", paired[0]), (f"{CANDIDATE_FLAG} {stack}", paired[1])]
    for flag, python in specs:
        if python == none and flag != option:
            raise pytest.UsageError(
                f"{flag}={none}: each side of a paired run is a {what} to measure"
            )
        if releases is not None and releases.written(python):
            why = releases.error(python)
            if why:
                raise pytest.UsageError(f"{flag}: {why}")
            continue
        if python not in keywords and python_in(python) is None:
            why = "is not a Python executable" if Path(python).exists() else "does not exist"
            release = f", a release {releases.form}" if releases is not None else ""
            raise pytest.UsageError(
                f"{flag}: {python} {why} (a Python with {what}, its venv, `{build}`{release} "
                f"or `{none}`)"
            )


@dataclass(frozen=True)
class PythonEnvStack:
    """A stack whose implementation is a Python environment (Horovod, TensorFlow, verbs): one
    option names it (`keywords`: the stack's own default, e.g. `build`, and `none`), a paired
    run names two. The hooks every such stack answers alike, which its plugin module exports
    as bound methods:

        TF = PythonEnvStack("tf", "--hpc-tf-python", "TensorFlow", (BUILD, NONE), tf_python)
        pytest_hpccomm_paired_stacks = TF.paired_stacks
        pytest_hpccomm_under_test = TF.under_test
        pytest_hpccomm_foreseen_skip = TF.foreseen_skip  # every placed item: placement_reason

    and its pytest_configure calls TF.check(config) (a misnamed side: usage error).
    `releases`: the stack's releases by name, when the option takes them too."""

    stack: str
    option: str  # e.g. --hpc-tf-python
    what: str  # what the Python must have, for messages: "TensorFlow"
    keywords: tuple[str, str]  # (the default implementation's keyword, the opt-out keyword)
    python: Callable[[pytest.Config], str]  # the option's value, its default filled in
    releases: Releases | None = None

    def check(self, config: pytest.Config) -> None:
        check_python_specs(
            config,
            self.stack,
            self.option,
            self.python(config),
            self.what,
            self.keywords,
            self.releases,
        )

    @pytest.hookimpl(optionalhook=True)
    def paired_stacks(self, config: pytest.Config) -> list[str]:
        return [self.stack]  # two environments, one per side: a keyword or a Python/venv each

    @pytest.hookimpl(optionalhook=True)
    def under_test(self, config: pytest.Config, stack: str) -> str | None:
        return self.python(config) if stack == self.stack else None

    @pytest.hookimpl(optionalhook=True)
    def foreseen_skip(self, item: pytest.Item) -> str | None:
        return foreseen_placement(item, self.stack)


K = TypeVar("K", bound=Hashable)
G = TypeVar("G", bound=Guarded)


class SessionStore(Generic[K, G]):
    """One side's pooled sweeps of a session, one per key (measure.pooling.JobPool): `get`
    pools --hpc-repeats jobs, `more` adds one for an undecided verdict, `paired` runs the rounds
    of a paired A/B run against `base` (the other side's store, whose jobs the canary never
    stretches), `cost` is what a key's jobs took. A job is `job(key, *context)` (context: what
    the job needs and the key does not name, e.g. where its ranks go), run under the contention
    guard (`guard`: again while another process shared the cores; kept and marked, its verdict
    INCONCLUSIVE, when it never had them to itself):

        store = SessionStore(job, merge, repeats, max_repeats, (SweepFailed,), base=base_store)
        Point(get=lambda: store.get(key, site), more=lambda: store.more(key, site),
              cost=lambda: store.cost(key), paired=lambda: store.paired(key, rounds, site))

    A store whose jobs run several parts at once (benchmarks sharing one launch) names how to
    run one part alone and how to cut a sweep down to a part (`part_job(key, part, *context)`,
    `restrict(sweep, part)`): `get_part`, `more_of` and `cost(key, part)` then grow an
    undecided part by jobs of that part only. `retry`: a contention guard shared with another
    store (one streak of disturbed jobs for both sides of a paired run).
    """

    def __init__(
        self,
        job: Callable[..., G],
        merge: Callable[[Sequence[G]], G],
        repeats: int,
        max_repeats: int,
        failures: tuple[type[BaseException], ...],
        base: SessionStore[K, G] | None = None,
        guard: bool = True,
        *,
        retry: QuietRetry | None = None,
        part_job: Callable[..., G] | None = None,
        restrict: Callable[[G, Any], G] | None = None,
    ) -> None:
        self.job, self.base, self.guard = job, base, guard
        self.part_job, self.restrict = part_job, restrict
        self.pool: JobPool[G] = JobPool(merge, repeats, max_repeats, failures)
        self.retry = QuietRetry() if retry is None else retry

    def guarded(self, run: Callable[[], G]) -> G:
        """run() under the contention guard (as it is when `guard` is off)."""
        return self.retry.guarded(run) if self.guard else run()

    def one_job(self, key: K, *context: Any) -> G:
        return self.guarded(lambda: self.job(key, *context))

    def round_job(self, key: K, *context: Any) -> G:
        """This side's job in a paired round (a stack may run it on processes of its own)."""
        return self.one_job(key, *context)

    def paired_job(self, key: K, round_: int, *context: Any) -> G:
        """This side's job in round `round_` of a paired run: round_job, for a store whose
        rounds differ by their index (e.g. where each round's fresh processes go)."""
        return self.round_job(key, *context)

    def get(self, key: K, *context: Any) -> G:
        return self.pool.get(key, lambda: self.one_job(key, *context))

    def more(self, key: K, *context: Any) -> G | None:
        return self.pool.more(key, lambda: self.one_job(key, *context))

    def get_part(self, key: K, part: Hashable, *context: Any) -> G:
        """The key's sweep (get), or once more_of added jobs of `part`, that part's view."""
        return self.pool.get_part(key, part, lambda: self.one_job(key, *context))

    def more_of(self, key: K, part: Hashable, *context: Any) -> G | None:
        """`part`'s view with one more job of it alone pooled in (None: no more allowed):
        re-running the key's other parts would add no evidence to an undecided point."""
        part_job, restrict = self.part_job, self.restrict
        if part_job is None or restrict is None:
            raise ValueError("this store's jobs have no parts: it has no part_job and restrict")
        return self.pool.more_of(
            key,
            part,
            lambda: self.guarded(lambda: part_job(key, part, *context)),
            lambda sweep: restrict(sweep, part),
        )

    def cost(self, key: K, part: Hashable | None = None) -> dict[str, Any]:
        """What a key's jobs (with `part`'s own, more_of) took."""
        return self.pool.cost(key, part)

    def paired(
        self, key: K, rounds: int, *context: Any, base: SessionStore[K, G] | None = None
    ) -> tuple[G, G]:
        """(this store's, the base's) sweeps of `rounds` rounds, this store being the
        candidate's: one job of each side per round, adjacent, which side first drawn at random
        (balanced). `base`: the other side's store when this one was made without it."""
        other = self.base if base is None else base
        if other is None:
            raise ValueError("not a paired A/B run: this store has no base")
        return self.pool.paired(
            key,
            lambda round_: other.paired_job(key, round_, *context),
            lambda round_: self.paired_job(key, round_, *context),
            rounds,
        )


@dataclass(frozen=True)
class Point(Generic[S]):
    """One benchmark point of a stack's session store: get() the pooled sweep, more() one more
    job (None: no more allowed), cost() what the repeats cost; in a paired A/B run paired()
    gives (candidate, base) sweeps of the same rounds. fingerprint(sweep): what only the
    peers know (library versions, hosts), into every record's fingerprint."""

    get: Callable[[], S]
    more: Callable[[], S | None]
    cost: Callable[[], dict[str, Any]]
    paired: Callable[[], tuple[S, S]] | None = None
    fingerprint: Callable[[S], Mapping[str, Any]] = _own_fingerprint


def judge_point(
    record: Record,
    point: Point[S],
    records: Callable[[S], list[Measurement]],
    failures: tuple[type[BaseException], ...],
    functional: str | None = None,
) -> None:
    """The point judged. Stored mode: every record against its baseline; while a verdict is
    undecided, one more job is pooled and the records made again (baselines/adaptive), every
    record kept before a regression fails the item. A paired run: each candidate record
    against the base's record of the same point (both sides validated alike, a failure naming
    the side). `functional`: why the numbers are not judged (an emulated device): the records
    are reported without a verdict. A job that fails (one of `failures`) fails the item with
    its one line."""
    if point.paired is not None:
        try:
            candidate, base = point.paired()
        except failures as exc:
            pytest.fail(str(exc), pytrace=False)
        cand_ms = _side("candidate", records, candidate)
        # what only the base's peers know (its library versions) goes with its records
        base_fp = dict(point.fingerprint(base))
        base_ms = [
            dataclasses.replace(b, extra={**b.extra, BASE_FINGERPRINT: base_fp})
            for b in _side("base", records, base)
        ]
        if [m.key for m in cand_ms] != [m.key for m in base_ms]:
            pytest.fail(
                f"the sides measured different points: candidate {[m.key for m in cand_ms]}, "
                f"base {[m.key for m in base_ms]}",
                pytrace=False,
            )
        if functional is None:
            record.all(cand_ms, point.fingerprint(candidate), base_ms)
        else:
            for m, b in zip(cand_ms, base_ms, strict=True):
                record.functional(m, functional, point.fingerprint(candidate), b)
        return
    try:
        sweep = point.get()
    except failures as exc:
        pytest.fail(str(exc), pytrace=False)
    fingerprint = point.fingerprint(sweep)
    ms = records(sweep)
    if functional is not None:
        for m in ms:
            record.functional(m, functional, fingerprint)
        return

    def grow() -> list[Measurement] | None:
        try:
            grown = point.more()
        except failures as exc:
            pytest.fail(f"adaptive repeat: {exc}", pytrace=False)
        return None if grown is None else records(grown)

    record.all(
        until_decided(ms, lambda m: record.undecided(m, fingerprint), grow, point.cost),
        fingerprint,
    )


def validate_point(
    point: Point[S],
    records: Callable[[S], list[Measurement]],
    failures: tuple[type[BaseException], ...],
) -> None:
    """A functional pass that reports nothing: the point's records made, and so validated
    (both sides in a paired run)."""
    try:
        if point.paired is None:
            records(point.get())
            return
        candidate, base = point.paired()
    except failures as exc:
        pytest.fail(str(exc), pytrace=False)
    _side("candidate", records, candidate)
    _side("base", records, base)


def _side(name: str, records: Callable[[S], list[Measurement]], sweep: S) -> list[Measurement]:
    try:
        return records(sweep)
    except pytest.fail.Exception as exc:
        pytest.fail(f"{name}: {exc}", pytrace=False)
