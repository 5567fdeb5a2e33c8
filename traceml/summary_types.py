"""The report summary's types: each section of ``summary.json`` (and so of
``Report.summary``) as a ``TypedDict`` of codes and numbers, with the
ranges its readers rely on.

``traceml/run_schema.json``, which a saved run is checked against on load,
is generated from these types (``tools/gen_schema.py``, through
:mod:`traceml.json_schema`); a unit test fails when the two differ.  So a
new summary key is a field here, then the generator run.

The types name every key ``build()`` puts in a summary (a unit test walks
the corpus's summaries for keys no type names).  A key marked
``NotRequired`` may be absent: a run file saved before the key was kept
lacks it, and the readers do without; in a ``total=False`` type every key
is so (the parts first typed after files holding them were written).  A
key no type names is allowed in a file and ignored.  Seconds are ``_s``;
shares are fractions of 1.
"""

import sys
from typing import Annotated, Literal, Optional, Union

from .json_schema import Def, Schema, label_is, schema, when

if sys.version_info >= (3, 11):
    from typing import NotRequired, TypedDict
else:
    from typing_extensions import NotRequired, TypedDict

# The largest count int64 nanoseconds and the C store can hold (2**62).
MAX_COUNT = 4611686018427387904
# The most workers a DataLoader option is checked against (2**20).
MAX_WORKERS = 1048576

NonNegative = Annotated[float, Schema(minimum=0)]
NonNegativeInt = Annotated[int, Schema(minimum=0)]
PositiveInt = Annotated[int, Schema(minimum=1)]
WorkerCount = Annotated[int, Schema(minimum=0, maximum=MAX_WORKERS)]
PositiveWorkerCount = Annotated[int, Schema(minimum=1, maximum=MAX_WORKERS)]
# A finding as a run file keeps it: [code, numbers] (findings.stored).
Item = Annotated[tuple[str, dict], Schema(minItems=2, maxItems=2)]
DiagnosisLabel = Literal['INPUT-BOUND', 'BALANCED', 'COMPUTE-BOUND', 'HAND-OVER', 'HOST-BOUND']
ShapeLabel = Literal['FAST', 'HEAVY-TAILED', 'UNIFORMLY-SLOW']
# [gap, count]: one row of a gap histogram.
GapCount = Annotated[list[int], Schema(minItems=2, maxItems=2)]
SHARE = {"$ref": "#/$defs/share"}     # in conditions: a Share
WaitPart = Literal['worker_making', 'worker_cpu_wait', 'main_cpu', 'cpu_wait', 'host_cpu_wait',
                   'other_threads', 'others_cpu_wait', 'sampler', 'transit_cpu_wait', 'behind_worker', 'in_transit',
                   'asleep']

# The named ranges, each kept once under the schema's $defs.
Count = Annotated[int, Schema(minimum=0, maximum=MAX_COUNT), Def('count')]
CountOrNull = Annotated[Optional[Count], Def('count_or_null')]
IntOrNull = Annotated[Optional[int], Def('int_or_null')]
NumberOrNull = Annotated[Optional[float], Def('number_or_null')]
Share = Annotated[float, Schema(minimum=0), Def('share')]
ShareOrNull = Annotated[Optional[Share], Def('share_or_null')]
Seconds = Annotated[float, Schema(minimum=0), Def('seconds')]
SecondsOrNull = Annotated[Optional[Seconds], Def('seconds_or_null')]
StringOrNull = Annotated[Optional[str], Def('string_or_null')]
Strings = Annotated[list[str], Def('strings')]
StepIndices = Annotated[list[Annotated[int, Schema(minimum=0, maximum=MAX_COUNT)]], Schema(description=(
            'Indices into the per-step arrays (checked below the step count by the '
            'reader).')), Def('step_indices')]


@schema('durations')
class Durations(TypedDict):
    """Statistics of a duration in seconds; all null when nothing was measured."""

    mean: NumberOrNull
    median: NumberOrNull
    p90: NumberOrNull
    p95: NumberOrNull
    p99: NumberOrNull
    max: NumberOrNull
    total: NumberOrNull


class Source(TypedDict):
    name: NotRequired[str]
    steps: NotRequired[Count]


ItemOrNull = Annotated[Optional[Item], Schema(description=(
            'One finding as a run file keeps it (traceml.findings.stored): a [code, '
            'numbers] pair, or null where the report has no such rule. The rules behind '
            'the labels (diagnosis_rule_item, shape_rule_item, stalls.rule_item, '
            'gpu.rule_text_item), worded again by Report.load into the key without _item '
            '(result.RULE_WORDS); absent from files saved before they were kept.')), Def('item_or_null')]


class StallsHostWaits(TypedDict):
    count: PositiveInt
    queued_s: NonNegative
    steps: NotRequired[list[Count]]


@schema('stalls')
class Stalls(TypedDict):
    threshold_s: Annotated[float, Schema(description='At most findings.stall_threshold.MAX_THRESHOLD_S (int64 nanoseconds).', minimum=0, maximum=9000000000.0)]
    rule: str
    rule_item: NotRequired[ItemOrNull]
    count: Count
    steps: StepIndices
    outliers: Count
    outlier_steps: NotRequired[StepIndices]
    outlier_max_s: NumberOrNull
    calm_median_s: NotRequired[Optional[Annotated[float, Schema(description='median input wait of the steady fetches that are not stalls (s)')]]]
    stall_median_s: NotRequired[Optional[Annotated[float, Schema(description='median input wait of the stalls (s)')]]]
    matter: str
    cost_share: NumberOrNull
    gaps: list[int]
    gap_histogram: list[GapCount]
    rule_code: NotRequired[Annotated[str, Schema(description=(
            "The stall rule that drew the line (findings.stall_threshold)."))]]
    floor_s: NotRequired[Seconds]
    slow_count: NotRequired[Count]
    all_slow: NotRequired[bool]
    every_fetch_slow: NotRequired[bool]
    median_gap: NotRequired[NumberOrNull]
    modal_gap: NotRequired[IntOrNull]
    host_waits: NotRequired[Annotated[Optional[StallsHostWaits], Schema(description=(
            'The steady fetches that waited past the stall line only through the loop '
            "thread's wait for a core inside them (traceml/findings/wait_parts.py "
            'host_waits; not counted as stalls): their count, mean run-queue wait (s) and steps.'
            ' null: none, or no clocks.'))]]
    less_core_waits: NotRequired[Annotated[bool, Schema(description=(
        "Whether the rule read the clocked fetches' waits less their waits for a core "
        "(calm_median_s and stall_median_s are then those waits)."))]]


@schema('cadence')
class Cadence(TypedDict):
    period: CountOrNull
    num_workers: CountOrNull
    matches_num_workers: Optional[bool]
    multiple_fraction: ShareOrNull


class CadenceTest(TypedDict, total=False):
    """One exact test of "a stall every ``period`` fetches" on residue
    ``phase`` (findings/stall_timing.py predicted_cadence): the fetches
    tested, the slots on the residue, the stalls and those on the residue,
    how many (period, phase) pairs the search tried (``tests``), the
    p-values (hypergeometric tail, rank test, their combination, before and
    after the search's Bonferroni factor; ``best_p_value``: the smallest the
    counts allow), and the answers.  The several-stalls test
    (stall_timing._multi_residue_test) adds ``residues``, the places mod
    ``period`` that stall (``phase`` the least of them; ``slots`` and
    ``on_residue`` count over them all), and, where they share one residue
    of a smaller period d (``spread_period``), ``spread_p_value``: the
    test refuting "a stall every d fetches" with misses spread alike."""

    period: PositiveInt
    phase: NonNegativeInt
    residues: list[NonNegativeInt]
    spread_p_value: Share
    spread_period: PositiveInt
    fetches: Count
    slots: Count
    stalls: Count
    on_residue: Count
    tests: Count
    p_value: Share
    single_p_value: Share
    hypergeom_p_value: Share
    rank_p_value: ShareOrNull
    best_p_value: Share
    every: bool
    periodic: bool
    consistent: bool
    searched: bool
    any_phase_phase: Annotated[NonNegativeInt, Schema(description=(
        "The residue holding the most stalls at this period (stall_timing.any_phase)."))]
    any_phase_p_value: Annotated[Share, Schema(description=(
        "The hypergeometric tail at that residue, times the period (every phase tried)."))]
    any_phase_fits: Annotated[bool, Schema(description=(
        "Whether the stalls are periodic or consistent at that residue."))]
    last_position: Annotated[Optional[int], Schema(description=(
        "The last tested fetch's position in its epoch: where the run would go on "
        "(stall_timing.predicted_settle_steps counts the later fetches on the residue "
        "from it)."))]


@schema("temporal",
        when(label_is("PERIODIC"), {"required": ["period", "autocorrelation"]}),
        when(label_is("IRREGULAR"), {"required": ["modal_gap", "modal_share"],
                                     "properties": {"modal_share": SHARE}}))
class Temporal(TypedDict):
    label: Literal['PERIODIC', 'IRREGULAR', 'EVERY-FETCH', 'TOO-FEW', 'UNSETTLED']
    period: NotRequired[CountOrNull]
    counted: NotRequired[StringOrNull]
    autocorrelation: NotRequired[NumberOrNull]
    p_value: NotRequired[NumberOrNull]
    modal_gap: NotRequired[IntOrNull]
    modal_share: NotRequired[ShareOrNull]
    modal_count: NotRequired[CountOrNull]
    modal_leads: NotRequired[Optional[bool]]
    multiple_fraction: NotRequired[ShareOrNull]
    gaps: NotRequired[Count]
    tested: NotRequired[Literal['predicted', 'searched']]
    predicted: NotRequired[Optional[CadenceTest]]
    searched: NotRequired[Optional[CadenceTest]]
    consistent_period: NotRequired[CountOrNull]
    settle_steps: NotRequired[CountOrNull]
    phase_filled: NotRequired[bool]
    burst_gap_histogram: NotRequired[list[GapCount]]
    bursts: NotRequired[Count]


@schema("concentration",
        when({"required": ["stall_wait_share"],
              "properties": {"stall_wait_share": {"type": "number"}}},
             {"required": ["stall_step_share"], "properties": {"stall_step_share": SHARE}}))
class Concentration(TypedDict):
    stall_wait_share: NotRequired[ShareOrNull]
    stall_step_share: NotRequired[ShareOrNull]


@schema('trend_not_yet')
class TrendNotYet(TypedDict):
    """Where no trend was found: the first and last tenths' medians of the steady waits
    (each round's mean where round_steps > 1) differ materially, by the trend rule's three
    checks, though no slope or change passed its test (traceml/findings/wait_trend.py,
    not_yet): "not yet". null where the tenths are near or a trend was found."""

    label: Literal['RISING', 'FALLING']
    first_tenth_median_s: Seconds
    last_tenth_median_s: Seconds
    round_steps: Annotated[int, Schema(minimum=1)]
    less_core_waits: NotRequired[Annotated[bool, Schema(description=(
        "Read from the clocked fetches' waits less their waits for a core (stalls' "
        "less_core_waits): the medians are those waits; absent: the waits as recorded."))]]


@schema("trend",
        when(label_is("STEP"),
             {"anyOf": [
                 {"required": ["first_epoch", "first_epoch_median_s", "later_epochs_median_s"]},
                 {"required": ["changed_at_step", "before_median_s", "after_median_s"]}]},
             {"properties": {"slope_ms_per_step": {"type": "number"}}}))
class Trend(TypedDict):
    """RISING / FALLING: a trend by the sieve-bootstrap test of traceml/findings/wait_trend.py,
    with its Theil-Sen slope (after_first_epoch, when set: measured within the epochs
    after that one, past a material change of level at its end; the tenths' medians are
    then the later epochs'). STEP: one change of level after the first epoch, no trend
    within the later epochs, or (changed_at_step) one inside the run that two levels fit
    better than a line, no trend on either side, or that Pettitt's change-point test
    finds where no slope was (change_point); no slope (null), and the two medians."""

    label: Literal['RISING', 'FALLING', 'STEP']
    slope_ms_per_step: NumberOrNull
    slope_interval_ms_per_step: NotRequired[Annotated[Optional[Annotated[list[float], Schema(minItems=2, maxItems=2)]], Schema(description=(
            "Sen's interval of the slope at 1 - TREND_ALPHA, [low, high]; absent from run"
            ' files saved before it was given, null for STEP.'))]]
    slope_ms_per_epoch: NotRequired[NumberOrNull]
    first_tenth_median_s: NumberOrNull
    last_tenth_median_s: NumberOrNull
    first_epoch: NotRequired[int]
    first_epoch_median_s: NotRequired[Seconds]
    later_epochs_median_s: NotRequired[Seconds]
    after_first_epoch: NotRequired[IntOrNull]
    changed_at_step: NotRequired[Annotated[int, Schema(minimum=0, description=(
        "STEP inside the run: the steady step (0-based) from which the waits held their "
        "second level; absent for a STEP after the first epoch."))]]
    before_median_s: NotRequired[Seconds]
    after_median_s: NotRequired[Seconds]
    at_epoch_start: NotRequired[Annotated[IntOrNull, Schema(description=(
        "STEP inside the run: the epoch whose first step the change came with "
        "(wait_trend.EPOCH_START_NEAR blocks), null where it came inside an epoch."))]]
    workers_after: NotRequired[Annotated[list[NonNegativeInt], Schema(description=(
        "STEP inside the run: the workers that made batches after the change, where "
        "fewer than before did (wait_trend.workers_at_change; the others' shards ran "
        "out); absent otherwise."))]]
    workers_before: NotRequired[Annotated[list[NonNegativeInt], Schema(description=(
        "Beside workers_after: the workers that made batches before the change."))]]
    change_point: NotRequired[Annotated[bool, Schema(description=(
        "STEP inside the run found by Pettitt's change-point test where no slope was "
        "(wait_trend._change_point); absent: by the two-levels fit after a slope."))]]
    round_steps: NotRequired[Annotated[int, Schema(minimum=1, description=(
        "Fetches a round (max(1, num_workers)): > 1, the rule read each round's mean wait "
        'and the tenths\' medians are of those means; absent: 1.'))]]
    less_core_waits: NotRequired[Annotated[bool, Schema(description=(
        "Read from the clocked fetches' waits less their waits for a core (stalls' "
        "less_core_waits): the medians are those waits; absent: the waits as recorded."))]]
    tau: NotRequired[NumberOrNull]
    p_value: NotRequired[NumberOrNull]
    host_cores: NotRequired[Annotated[list[NonNegative], Schema(
        minItems=2, maxItems=2, description=(
            "Other programs' CPU (cores) on the two sides the trend compares: before "
            "and after a STEP's change, or the first and last tenths; absent where the "
            "host was not read."))]]


class CodePlace(TypedDict):
    """A function and where it starts: its qualified name, file, line."""

    function: str
    file: str
    line: NonNegativeInt


class EpochStartByEpoch(TypedDict):
    epoch: NonNegativeInt
    fetches: Count
    input_wait_s: NonNegative
    iter_s: NotRequired[Annotated[NonNegative, Schema(description=(
        "The wall seconds of iter() on the loader itself, inside the first fetch's "
        "wait (with workers: starting their processes and drawing the first index "
        "lists from the sampler)."))]]
    iter_cpu_s: NotRequired[Annotated[Optional[NonNegative], Schema(description=(
        "The main thread's CPU seconds in that iter()."))]]
    init_s: NotRequired[Annotated[NonNegative, Schema(description=(
        "The longest worker_init_fn call of the workers started for this epoch (wall "
        "seconds, timed in the workers before their first batch)."))]]
    init_cpu_s: NotRequired[Annotated[NonNegative, Schema(description=(
        "That call's CPU seconds on the worker's thread."))]]


@schema('epoch_start')
class EpochStart(TypedDict):
    count: Count
    steps: StepIndices
    input_wait_s: Durations
    by_epoch: NotRequired[list[EpochStartByEpoch]]
    making_share: NotRequired[Share]
    iter_share: NotRequired[Annotated[Share, Schema(description=(
        "Of the start-up fetches' wait, the share iter() itself took (build.startup.start_iter)."))]]
    iter_cpu_share: NotRequired[Annotated[Share, Schema(description=(
        "Of iter()'s wall time, the share the main thread spent on a CPU."))]]
    sampler_code: NotRequired[Annotated[CodePlace, Schema(description=(
        "Where iter() draws the first index lists: the batch_sampler's __iter__, or the "
        "sampler's a torch BatchSampler wraps (wrapping.sampler_code); with iter_share."))]]
    sampler_library: NotRequired[Annotated[bool, Schema(description=(
        "Whether sampler_code is an installed package's or the standard library's "
        "(stacks.is_library): torch's own samplers, which draw an index list in "
        "microseconds, so iter()'s time is the workers' start."))]]
    init_share: NotRequired[Annotated[Share, Schema(description=(
        "Of the start-up fetches' wait, the share each epoch's longest worker_init_fn "
        "took (build.startup.start_init)."))]]
    worker_init_code: NotRequired[Annotated[CodePlace, Schema(description=(
        "Where the loader's worker_init_fn is; with init_share."))]]
    first_cpu_ratio: NotRequired[Annotated[NonNegative, Schema(description=(
        "The median worker CPU of the start-up fetches' batches over the steady "
        "fetches' batches' (build.startup.start_cost)."))]]
    first_work_ratio: NotRequired[Annotated[NonNegative, Schema(description=(
        "The same ratio of the batches' own time: make time less the worker's wait "
        "for a core (build.startup.start_cost)."))]]


class Loader(TypedDict):
    """The DataLoader's settings the report shows (wrapping.LOADER_FIELDS
    and whether it shuffles; null where the loader has no such attribute)."""

    num_workers: NotRequired[CountOrNull]
    batch_size: NotRequired[IntOrNull]
    prefetch_factor: NotRequired[IntOrNull]
    persistent_workers: NotRequired[Optional[bool]]
    pin_memory: NotRequired[Optional[bool]]
    pin_memory_asked: NotRequired[Annotated[bool, Schema(description=(
        "True where the loader was given pin_memory=True and its iterator does not "
        "pin (no accelerator here): pin_memory then reads False "
        "(wrapping._pinning)."))]]
    in_order: NotRequired[Optional[bool]]
    shuffle: NotRequired[Optional[bool]]


class EpochFacts(Loader, total=False):
    """One epoch's loader settings, start method and worker PIDs."""

    epoch: NonNegativeInt
    start_method: StringOrNull
    worker_pids: Optional[list[int]]


class WorkersExited(TypedDict):
    """A worker that died during its epoch (evidence.dead_workers): its
    id, pid and epoch, its exit code (< 0: minus the signal) and the
    signal's name, the step near or after which it died, and ``when``:
    "near" (the sampler saw it go) or "after" (its exit code alone)."""

    worker: IntOrNull
    pid: IntOrNull
    step: IntOrNull
    epoch: NotRequired[IntOrNull]
    exitcode: NotRequired[IntOrNull]
    signal: NotRequired[StringOrNull]
    when: NotRequired[Literal['near', 'after']]


class RaisedFirst(TypedDict):
    """The first fetch that raised, where several did: its epoch, the
    batches delivered before it in that epoch, and the exception."""

    epoch: NonNegativeInt
    fetch: NonNegativeInt
    type: str
    message: str
    worker: IntOrNull
    wait_s: NotRequired[Seconds]


class Raised(TypedDict):
    """The exceptions the loop's fetches raised (evidence.raised), the
    latest epoch's latest: the epoch and its fetch that raised it (from
    0), the index the next step of that epoch would have had in this
    report (null: none of the epoch's steps is in it), the exception's
    qualified type name, its message (the worker's own last line for one
    re-raised from a DataLoader worker; at most
    torch_private.RAISED_MESSAGE_MAX characters), the worker's id, whether
    the loop ended there (no step of the epoch came after it), how many
    fetches raised, and the first of them where several did; ``wait_s``
    how long the raising fetch had waited (a KeyboardInterrupt in a fetch
    that hangs: the wait no step records)."""

    epoch: NonNegativeInt
    fetch: NonNegativeInt
    step: IntOrNull
    type: str
    message: str
    worker: IntOrNull
    wait_s: NotRequired[Seconds]
    ended: NotRequired[bool]
    count: NotRequired[Annotated[int, Schema(minimum=1)]]
    first: NotRequired[RaisedFirst]


@schema("headline",
        when(label_is("EPOCH-START"), {"required": ["epoch_start_share"],
                                       "properties": {"epoch_start_share": SHARE}}),
        when(label_is("STUCK"), {"required": ["longest_wait_s", "stuck_after_s"]}))
class Headline(TypedDict):
    label: Literal['STEADY', 'STUCK', 'EPOCH-START', 'WORKER-EXITED', 'RAISED']
    code: str
    epoch_start_share: NotRequired[ShareOrNull]
    epoch_start_s_per_epoch: NotRequired[list[float]]
    stuck_after_s: NotRequired[SecondsOrNull]
    longest_wait_s: NotRequired[NumberOrNull]
    exited: NotRequired[Optional[WorkersExited]]
    raised: NotRequired[Optional[Raised]]


@schema('stuck')
class Stuck(TypedDict):
    oldest_rank: IntOrNull
    worker: IntOrNull
    pid: IntOrNull
    state: StringOrNull
    worker_cpu_s_during_wait: NumberOrNull
    still_waiting: bool
    step: IntOrNull
    step_in_epoch: IntOrNull
    epoch: IntOrNull
    waited_s: NumberOrNull


class WorkersPidChanges(TypedDict):
    step: IntOrNull
    epoch: IntOrNull
    old: NotRequired[list[int]]
    new: NotRequired[list[int]]


@schema(None,
        when({"required": ["readings_lost"], "properties": {"readings_lost": {"enum": [True, 1]}}},
             {"required": ["overwritten"]}))
class WorkersSampler(TypedDict):
    samples: Count
    cpu_share: ShareOrNull
    period_s: SecondsOrNull
    enabled: bool
    error: NotRequired[StringOrNull]
    readings_lost: NotRequired[Optional[Union[bool, int]]]
    overwritten: NotRequired[CountOrNull]
    dropped_watch: NotRequired[CountOrNull]


class IntervalSums(TypedDict, total=False):
    """One kind of interval (evidence.intervals: slow, each stall's input
    wait; fast, the rest of the steady time): the count, the wall time, and
    per counter of evidence.COUNTERS its total over the intervals and
    median per interval (null: not read); the cores busy or runnable; what
    other programs ran (others_cpu_s)."""

    count: Count
    wall_s: Seconds
    worker_cpu_s: NumberOrNull
    worker_cpu_s_median: NumberOrNull
    runq_wait_s: NumberOrNull
    runq_wait_s_median: NumberOrNull
    read_bytes: NumberOrNull
    read_bytes_median: NumberOrNull
    major_faults: NumberOrNull
    major_faults_median: NumberOrNull
    main_cpu_s: NumberOrNull
    main_cpu_s_median: NumberOrNull
    main_runq_wait_s: NumberOrNull
    main_runq_wait_s_median: NumberOrNull
    main_read_bytes: NumberOrNull
    main_read_bytes_median: NumberOrNull
    main_major_faults: NumberOrNull
    main_major_faults_median: NumberOrNull
    host_cpu_s: NumberOrNull
    host_cpu_s_median: NumberOrNull
    worker_cores_busy: NumberOrNull
    worker_cores_runnable: NumberOrNull
    main_cores_busy: NumberOrNull
    main_cores_runnable: NumberOrNull
    others_cpu_s: NumberOrNull
    busiest_worker_cores: NumberOrNull


class Awaited(TypedDict, total=False):
    """The awaited workers in the stalls (evidence.awaited_workers): stalls
    per worker id, the sampler's readings in them and those asleep, the
    readings' states, the workers' CPU and wall time (s), cores busy, the
    share of the wait the batch was still being made, and whether they
    read as blocked."""

    workers: dict[int, Count]
    readings: Count
    asleep: Count
    states: dict[str, Count]
    cpu_s: Seconds
    wall_s: Seconds
    cores: NumberOrNull
    making_share: NumberOrNull
    blocked: Optional[bool]


class WorkersIntervals(TypedDict):
    unavailable: Optional[dict[str, str]]
    slow: NotRequired[IntervalSums]
    fast: NotRequired[IntervalSums]


Items = Annotated[list[Item], Schema(description=(
            'Findings as a run file keeps them (traceml.findings.stored): [code, numbers]'
            " pairs, a code of a findings family's WORDS and the plain JSON numbers its "
            'words quote.')), Def('items')]


@schema('workers')
class Workers(TypedDict):
    pid_changes: list[WorkersPidChanges]
    pids_by_epoch: list
    exited: list[WorkersExited]
    sampler: WorkersSampler
    intervals: NotRequired[Optional[WorkersIntervals]]
    evidence: NotRequired[Strings]
    cpu_ticks_by_worker: NotRequired[Optional[dict]]
    evidence_items: NotRequired[Items]
    awaited: NotRequired[Optional[Awaited]]


class ThreadPool(TypedDict):
    """A native thread pool (threadpoolctl): its API, library and threads."""

    api: StringOrNull
    library: StringOrNull
    threads: Count


@schema('host')
class Host(TypedDict):
    usable_cpus: CountOrNull
    start_method: StringOrNull
    torch_version: StringOrNull
    oversubscribed: NotRequired[Optional[bool]]
    num_workers: NotRequired[CountOrNull]
    thread_pools: NotRequired[Annotated[list[ThreadPool], Schema(description=(
        "The native thread pools loaded in the main process that its DataLoader workers "
        "run too, torch's own left out (wrapping.thread_pools, threadpoolctl); absent: "
        "unknown."))]]
    by_epoch: NotRequired[list[EpochFacts]]


@schema('delivery')
class Delivery(TypedDict):
    known: Count
    in_order: Optional[bool]
    overtaking: CountOrNull
    ranks: NotRequired[list[Optional[NonNegativeInt]]]
    workers: NotRequired[list[Optional[NonNegativeInt]]]


class AttributionMade(TypedDict):
    slow: Count
    batches: Count
    split_s: Optional[Seconds]
    slow_on_residue: Share
    residue_slow: Share
    sizes: NotRequired[Optional[Annotated[list[float], Schema(minItems=2, maxItems=2)]]]
    sample_cost_ratio: NotRequired[NumberOrNull]
    size_p_value: NotRequired[Annotated[Share, Schema(description=(
        "LARGE-BATCH from the sizes only (period_from 'sizes'): the one-sided "
        "Mann-Whitney p-value that the stalled batches' sizes rank so high at random "
        "(attribution._stalls_by_size)."))]]


@schema("attribution",
        when(label_is("ONE-WORKER"), {"required": ["worker"]}),
        when(label_is("SLOW-SAMPLE"), {"required": ["period", "residue", "residue_share"],
                                       "properties": {"residue_share": SHARE}}),
        when(label_is("SLOW-COLLATE"), {"required": ["period", "residue", "residue_share",
                                                     "collate_share"],
                                        "properties": {"residue_share": SHARE,
                                                       "collate_share": SHARE}}),
        when(label_is("LOCK-STEP"), {"required": ["period"]}),
        when(label_is("LARGE-BATCH"), {"required": ["period", "residue", "made"]}),
        when({"required": ["ambiguous"], "properties": {"ambiguous": {"const": True}}},
             {"required": ["top_worker"]}))
class Attribution(TypedDict):
    label: Literal['ONE-WORKER', 'SLOW-SAMPLE', 'SLOW-COLLATE', 'LOCK-STEP', 'LARGE-BATCH']
    stall_workers: dict[int, Count]
    known: Count
    worker: NotRequired[IntOrNull]
    period: NotRequired[IntOrNull]
    residue: NotRequired[IntOrNull]
    residues: NotRequired[Annotated[list[NonNegativeInt], Schema(description=(
        "Every residue of rank % period that the workers made slow, where the "
        "make times name a set of them (attribution._made_residues); residue is "
        "the one holding the most."))]]
    residue_share: NotRequired[ShareOrNull]
    ambiguous: NotRequired[Optional[bool]]
    top_worker: NotRequired[IntOrNull]
    period_from: NotRequired[Literal['make_times', 'stalls', 'sizes', None]]
    stall_period: NotRequired[IntOrNull]
    made: NotRequired[Optional[AttributionMade]]
    share: NotRequired[ShareOrNull]
    own_share: NotRequired[ShareOrNull]
    others_share: NotRequired[ShareOrNull]
    cpu_ratio: NotRequired[NumberOrNull]
    make_ratio: NotRequired[NumberOrNull]
    sample_ratio: NotRequired[NumberOrNull]
    pinned_indices: NotRequired[list[int]]
    also_slow: NotRequired[dict[int, NonNegative]]
    collate_share: NotRequired[ShareOrNull]
    collate_sampled: NotRequired[Annotated[bool, Schema(description=(
        "True where collate_share is the share of the stalled fetches' stack samples "
        "taken under collate_fn (num_workers=0), not timed make time "
        "(attribution.with_collate_share)."))]]


@schema('batch_bytes')
class BatchBytes(TypedDict):
    median: NonNegative
    measured: Count
    max: NonNegative
    tensors_median: NotRequired[Annotated[Optional[NonNegative], Schema(description=(
        "The median count of tensors and arrays a measured batch holds (each crosses "
        "processes through its own shared-memory segment, a cost per tensor); null or "
        "absent: not counted (a run saved before the count)."))]]
    handover: NotRequired[Annotated[StringOrNull, Schema(description=(
        "The hand-over code large batches read as (findings/hand_over.py "
        "handover): handover_main or handover_bytes; null: none."))]]


class BatchCost(TypedDict):
    alike: bool
    slow: Count
    batches: Count
    ratio: Optional[NonNegative]


@schema('stats_s')
class StatsS(TypedDict):
    median: NonNegative
    p95: NonNegative
    mean: NonNegative


class ProductionModel(TypedDict):
    left_out: Count
    make_s: Optional[NonNegative]
    cpu_s: NotRequired[Optional[NonNegative]]
    runq_s: NotRequired[Optional[NonNegative]]
    handover_s: NotRequired[Optional[NonNegative]]
    wait_s: Optional[NonNegative]
    step_s: Optional[NonNegative]


@schema('sample_call')
class SampleCall(TypedDict):
    calls: Count
    median_s: Seconds
    mean_s: NotRequired[Seconds]
    share: NumberOrNull


@schema('sample_row')
class SampleRow(TypedDict):
    index: int
    s: Seconds
    cpu_s: NotRequired[SecondsOrNull]
    batch_share: NonNegative
    worker: int
    epoch: int
    step: int


class SamplesTable(TypedDict):
    order: Literal['claim', 'slowest']
    rows: Count
    of: Count
    index: list[int]
    s: list[NonNegative]
    cpu_s: NotRequired[list[Optional[NonNegative]]]
    batch_share: NotRequired[list[NonNegative]]
    worker: NotRequired[list[int]]
    epoch: NotRequired[list[int]]
    step: NotRequired[list[int]]


class SamplesSlow(TypedDict):
    too_few: NotRequired[Count]
    basis: NotRequired[Literal['cpu', 'wall', 'cpu+wall']]
    threshold_s: NotRequired[Seconds]
    wall_threshold_s: NotRequired[Seconds]
    first_left_out: NotRequired[Count]
    startup_left_out: NotRequired[Count]
    median_s: NotRequired[Seconds]
    count: NotRequired[Count]
    of: NotRequired[Count]
    indices: NotRequired[list[int]]
    stride: NotRequired[IntOrNull]
    residue: NotRequired[IntOrNull]
    residues: NotRequired[Annotated[list[NonNegativeInt], Schema(description=(
        "Where 2-3 places of the stride hold the slow samples: their residues "
        "(slow_samples._stride_set); residue is the one holding the most."))]]
    checked: NotRequired[Count]
    off_stride: NotRequired[Count]
    fast_on_stride: NotRequired[Count]
    p_value: NotRequired[Annotated[Optional[Share], Schema(description=(
        "The stride's p-value where it holds with exceptions (off_stride, "
        "fast_on_stride; slow_samples._stride); null where it holds exactly."))]]
    slow_timings: NotRequired[Count]
    timings: NotRequired[Count]
    slow_s: NotRequired[Seconds]
    fast_s: NotRequired[SecondsOrNull]
    slow_cpu_s: NotRequired[SecondsOrNull]
    time_share: NotRequired[Share]
    batch_share: NotRequired[Share]
    batches_holding: NotRequired[Count]
    batches_tested: NotRequired[Count]
    slow_workers: NotRequired[list[NonNegativeInt]]
    indices_moved: NotRequired[Count]


class SamplesGc(TypedDict):
    """The workers' garbage collections (gc.callbacks, traceml.worker_timing._time_gc):
    how many, their wall time, the samples they ran inside and that time, which the
    slow-sample test leaves out of each sample's own."""

    collections: Count
    s: Seconds
    samples: Count
    in_samples_s: Seconds
    longest_in_a_sample_s: Seconds
    sample_share: NonNegative


class WorkerSamples(TypedDict, total=False):
    """One worker's timed samples (sample_timing.summarise): how many, and
    the median and 25th percentile of their wall time (s)."""

    samples: Count
    median_s: Seconds
    p25_s: Seconds


@schema('samples')
class Samples(TypedDict):
    """Per-sample and collate times inside the workers (traceml.sample_timing,
    findings.slow_samples): each sample's __getitem__ (map-style, by index) or __next__
    (iterable, by position in its worker), __getitems__ and collate_fn calls, joined to
    the batches the steps met."""

    available: bool
    unavailable: NotRequired[StringOrNull]
    lost: NotRequired[Count]
    kind: NotRequired[Optional[Literal['map', 'iterable', 'getitems', 'mixed']]]
    batches: NotRequired[Count]
    samples: NotRequired[Count]
    sample_s: NotRequired[Optional[StatsS]]
    sample_cpu_s: NotRequired[Optional[StatsS]]
    sample_share: NotRequired[NumberOrNull]
    collate: NotRequired[Optional[SampleCall]]
    getitems: NotRequired[Optional[SampleCall]]
    gc: NotRequired[SamplesGc]
    slowest: NotRequired[list[SampleRow]]
    table: NotRequired[Optional[SamplesTable]]
    slow: NotRequired[Optional[SamplesSlow]]
    findings: NotRequired[list[Item]]
    by_worker: NotRequired[dict[int, WorkerSamples]]


class WorkerMaking(TypedDict, total=False):
    """One worker's batches (worker_timing): how many it made, the median
    and mean time to make one, their sample standard deviation (null under
    2 batches; absent in runs saved before it), and the median CPU in one
    (s)."""

    batches: Count
    make_median_s: Seconds
    make_mean_s: Seconds
    make_sd_s: SecondsOrNull
    cpu_median_s: SecondsOrNull


@schema("production",
        when({"properties": {"available": {"const": True}}},
             {"required": ["make_s", "production_share", "handover_share"],
              "properties": {"make_s": {"$ref": "#/$defs/stats_s"}}}))
class Production(TypedDict):
    available: bool
    unavailable: NotRequired[StringOrNull]
    batches: NotRequired[Count]
    coverage: Share
    make_s: NotRequired[Optional[StatsS]]
    cpu_s: NotRequired[Optional[StatsS]]
    runq_s: NotRequired[Optional[StatsS]]
    handover_s: NotRequired[Optional[StatsS]]
    busy_share: NotRequired[Optional[NonNegative]]
    production_share: NotRequired[Optional[NonNegative]]
    handover_share: NotRequired[Optional[NonNegative]]
    ready_before_fetch: NotRequired[ShareOrNull]
    model: NotRequired[Optional[ProductionModel]]
    samples: NotRequired[Samples]
    workers: NotRequired[dict[int, WorkerMaking]]


class PredictionByWorkers(TypedDict):
    num_workers: WorkerCount
    wait_s: NonNegative
    slow_batch_s: NotRequired[Annotated[NonNegative, Schema(description=(
        "Where the steady batches' p95 make time, at this num_workers' share of the "
        "cores, outlasts the look-ahead (num_workers x prefetch_factor batches at one a "
        "step): that batch's time (predict._exposed); the row's mean wait then "
        "understates the stalls."))]]
    look_ahead_s: NotRequired[Annotated[NonNegative, Schema(description=(
        "With slow_batch_s: the time the look-ahead holds."))]]
    main_fetch_s: NotRequired[Annotated[NonNegative, Schema(description=(
        "num_workers=0 only: the main process's own CPU a fetch measured at this run's "
        "num_workers (wait_parts' main_cpu), which num_workers=0 keeps where it is the "
        "sampler's and drops where it is receiving: the wait lies between wait_s and "
        "wait_s + main_fetch_s."))]]
    held_wait_s: NotRequired[Annotated[NonNegative, Schema(description=(
        "Rows past this run's num_workers only: the wait with the workers' cores held "
        "at this run's (predict.held_wait_with: more workers take no core from other "
        "threads); wait_s less this is what the model gains by taking cores from them."))]]


class PredictionThisRun(TypedDict):
    num_workers: WorkerCount
    predicted_wait_s: NonNegative
    measured_wait_s: Optional[NonNegative]
    error: NumberOrNull
    measured_step_s: NotRequired[Optional[NonNegative]]
    miss_of_step: NotRequired[Optional[NonNegative]]


@schema("prediction",
        when({"properties": {"keeps_up_with": {"type": "null"}}},
             {"properties": {"cheaper_by": {"type": "number", "minimum": 0}}}))
class Prediction(TypedDict):
    make_s: NonNegative
    cpu_s: NonNegative
    runq_s: Optional[NonNegative]
    off_cpu_s: NotRequired[NonNegative]
    compute_s: NonNegative
    handover_s: NonNegative
    usable_cpus: PositiveWorkerCount
    core_share: Annotated[float, Schema(maximum=1, exclusiveMinimum=0)]
    other_runnable: NonNegative
    other_runnable_no_workers: NotRequired[Annotated[NonNegative, Schema(description=(
        "The other runnable threads at num_workers=0 (predict: L - M + 1, the main "
        "process's computing threads paused during its fetch); absent: other_runnable."))]]
    num_workers: PositiveWorkerCount
    keeps_up_with: Optional[PositiveWorkerCount]
    keeps_up_held_wait_s: NotRequired[Annotated[NonNegative, Schema(description=(
        "Where keeps_up_with is past num_workers: its wait with the workers' cores held "
        "at this run's (predict.held_wait_with); above the hand-over, it keeps up only "
        "by taking cores from other threads."))]]
    worker_cores_needed: NonNegative
    enough_cores: NotRequired[bool]
    wait_floor_s: NonNegative
    step_floor_s: NotRequired[NonNegative]
    cheaper_by: Optional[NonNegative]
    main_cores: NotRequired[NonNegative]
    quiet_compute_s: NotRequired[NonNegative]
    by_workers: list[PredictionByWorkers]
    this_run: PredictionThisRun
    assumptions: list[Literal['round_robin', 'prefetch_deep', 'no_shared_lock', 'load_steady']]
    trust: NotRequired[Literal['trusted', 'misfit', 'unchecked', 'one_worker', 'slow_sample']]
    left_out_stuck: NotRequired[Count]


@schema('memory_span')
class MemorySpan(TypedDict):
    first: int
    last: int
    max: int
    growth: NotRequired[int]
    readings: NotRequired[Count]


class MemoryMain(TypedDict):
    rss: NotRequired[Optional[MemorySpan]]
    uss: NotRequired[Optional[MemorySpan]]


@schema('memory')
class Memory(TypedDict):
    available: bool
    unavailable: NotRequired[StringOrNull]
    main: NotRequired[Optional[MemoryMain]]
    worker_uss_growth: NotRequired[NumberOrNull]
    worker_rss_growth: NotRequired[NumberOrNull]
    epochs: NotRequired[list]
    epoch_jumps: NotRequired[list]
    findings: NotRequired[Strings]


class GpuReadings(TypedDict):
    readings: Count
    mean_pct: Optional[NonNegative]
    median_pct: Optional[NonNegative]


class GpuUtilisation(TypedDict):
    """NVML's GPU utilisation (percent of the driver's sample window in which a kernel ran) in
    input waits (slow: each stall's [begin, fetch_done)) against the rest of the steady
    steps (fast), by each reading's timestamp (evidence.gpu_utilisation). Absent from
    files saved before it was read; available false with why when NVML could not be read."""

    available: bool
    why: StringOrNull
    uuid: StringOrNull
    period_s: NumberOrNull
    error: StringOrNull
    readings: Count
    overwritten: Count
    dropped: Count
    window_s: NumberOrNull
    slow: GpuReadings
    fast: GpuReadings
    rule: Literal[None, 'too_few', 'gpu_idle_in_waits']


@schema('gpu')
class Gpu(TypedDict):
    """GPU-visible input wait (traceml.gpu; absent or null when cuda was off): CUDA events at
    each step's begin and fetch done, read lazily. host_wait_s and gpu_wait_s cover the
    same steady steps (those read); gpu_step_s the steady steps with a GPU step reading;
    seconds."""

    backend: StringOrNull
    ring: Annotated[int, Schema(minimum=2, maximum=MAX_WORKERS)]
    recorded: Count
    skipped: Count
    pending: Count
    error: StringOrNull
    steady_steps: Count
    steps_read: Count
    coverage: ShareOrNull
    ready_marked: Count
    host_wait_s: Durations
    gpu_wait_s: Durations
    gpu_step_s: Durations
    host_share: ShareOrNull
    gpu_share: NumberOrNull
    host_diagnosis: str
    rule: Literal['gpu_not_used', 'gpu_agrees', 'gpu_did_not_wait', 'gpu_differs']
    rule_text: str
    rule_text_item: NotRequired[ItemOrNull]
    utilisation: NotRequired[GpuUtilisation]


class RanksMissing(TypedDict):
    rank: NonNegativeInt
    reason: str


class RanksPerRank(TypedDict):
    rank: NonNegativeInt
    host: NotRequired[StringOrNull]
    steps: CountOrNull
    steady_steps: NotRequired[CountOrNull]
    diagnosis: StringOrNull
    diagnosis_rule: NotRequired[StringOrNull]
    diagnosis_rule_item: NotRequired[ItemOrNull]
    input_share: NotRequired[ShareOrNull]
    shape: NotRequired[StringOrNull]
    temporal: NotRequired[StringOrNull]
    period: NotRequired[CountOrNull]
    stalls: NotRequired[CountOrNull]
    next: NotRequired[Strings]
    next_items: NotRequired[Items]
    held_steps: Count
    held_share: NotRequired[ShareOrNull]
    unique_wait_s: NotRequired[Seconds]
    unique_share: NotRequired[ShareOrNull]
    cost_share: NotRequired[ShareOrNull]
    straggler: bool
    input_matters: NotRequired[bool]


class RanksEcho(TypedDict):
    straggler: NonNegativeInt
    rank: NonNegativeInt
    echo: Optional[bool]
    absorbed: NotRequired[Optional[float]]
    read: NotRequired[Literal['medians', 'slope']]
    unknown: NotRequired[Literal['few_stalls', 'flat_waits', None]]


@schema('ranks')
class Ranks(TypedDict):
    world_size: PositiveInt
    gathered: list[NonNegativeInt]
    missing: list[RanksMissing]
    timeout_s: NotRequired[SecondsOrNull]
    aligned_steps: Count
    per_rank: list[RanksPerRank]
    held_by: Annotated[list[Optional[NonNegativeInt]], Schema(description=(
            'Per aligned step, the rank holding the largest input wait (null: no rank has'
            ' the step).'))]
    max_wait: dict
    stragglers: list[NonNegativeInt]
    straggler_rule: str
    echo: list[RanksEcho]
    echo_rule: str
    next: Strings


class SlowCodeSamples(TypedDict):
    slow: NonNegative
    fast: NonNegative
    slow_other_thread: NotRequired[NonNegative]
    fast_other_thread: NotRequired[NonNegative]
    outside_batches: NotRequired[NonNegative]
    slow_off_cpu: NotRequired[NonNegative]
    fast_off_cpu: NotRequired[NonNegative]


class SlowCodeHotPath(TypedDict):
    file: str
    function: str
    first_line: int
    line: int
    share: Share
    library: NotRequired[Annotated[bool, Schema(description=(
        "In an installed package or the standard library (traceml.stacks.is_library): "
        "where the user's code spends its time, not code to change."))]]


class SlowCodeFunctions(TypedDict):
    file: str
    function: str
    first_line: int
    hot_line: int
    slow: NonNegative
    fast: NonNegative
    own_slow: NotRequired[NonNegative]
    own_fast: NotRequired[NonNegative]
    root_distance: NotRequired[NumberOrNull]
    share: NotRequired[ShareOrNull]
    library: NotRequired[bool]


@schema('slow_code')
class SlowCode(TypedDict):
    """The workers' sampled Python stacks (traceml.stacks, csrc/stacks.c): each sample tied to
    the batch its worker was making, the batches split into slow and fast by their make
    time (the two-group split of the steady batches' make times; at num_workers=0, stalled
    fetches against the others), per function the sample weight (ticks of interval_us CPU)
    of each group whose stack holds it; findings.slow_code judges it when stalls > 0.
    status is 'on' or why the stacks were not sampled."""

    status: str
    in_main: NotRequired[bool]
    one_group: NotRequired[bool]
    interval_us: NotRequired[PositiveInt]
    workers_sampled: NotRequired[Count]
    workers_refused: NotRequired[Count]
    lost: NotRequired[Count]
    samples: SlowCodeSamples
    slow_batches: NotRequired[Count]
    fast_batches: NotRequired[Count]
    slow_batches_in_making: NotRequired[Count]
    slow_cpu_share: NotRequired[NumberOrNull]
    fast_cpu_share: NotRequired[NumberOrNull]
    sampler_share: NotRequired[Annotated[NumberOrNull, Schema(description=(
            "num_workers=0: the share of the main process's sampled CPU in the fetches "
            "under the iterator's call to its sampler (torch_private.SAMPLER_FRAME); null"
            ' without samples.'))]]
    hot_path: NotRequired[list[SlowCodeHotPath]]
    functions: NotRequired[list[SlowCodeFunctions]]
    stalls: NotRequired[Count]
    slow_runq_share: NotRequired[NumberOrNull]
    slow_other_threads_cpu_share: NotRequired[Annotated[NumberOrNull, Schema(description=(
        "Of the slow batches' CPU (every thread of their worker), the part outside their "
        "samples and collate_fn as timed on the dataset's own thread; null where not "
        "every slow batch had a timed call."))]]
    slow_gc_cpu_share: NotRequired[Annotated[NumberOrNull, Schema(description=(
        "Of the slow batches' CPU, the part their workers' garbage collections took "
        "(timed in the workers); null where not timed."))]]
    slow_cpu_ratio: NotRequired[Annotated[NumberOrNull, Schema(description=(
        "The slow batches' median worker CPU over the fast ones' "
        "(findings/slow_code.py: at BUSIER_RATIO or more, their own code "
        "cost more, whatever stretched them)."))]]
    slow_other_cpu_share: NotRequired[NumberOrNull]
    slow_extra_cpu_share: NotRequired[Annotated[NumberOrNull, Schema(description=(
        "The slow batches' median worker CPU less the fast ones', over the slow batches' "
        "median make time: the part of a slow batch its own extra code explains."))]]
    off_path: NotRequired[Annotated[list[SlowCodeHotPath], Schema(description=(
        "The call path most of the slow batches' off-CPU wall-clock samples went down "
        "(traceml.stacks.hot_path of kind KIND_OFF): where they slept, read or waited."))]]


@schema('diagnosis_support')
class DiagnosisSupport(TypedDict):
    """The diagnosis's support under the circular block bootstrap of the steady steps
    (traceml/findings/label_support.py): the share of resamples giving the run's label,
    each label's share, the commonest other label, the input share and its resampled
    standard deviation, the bound between the two labels, about how many more steps would
    settle it, the block length (steps) and the number of resamples. null: NO-DATA or too
    few steps."""

    label: DiagnosisLabel
    support: Share
    readings: dict[DiagnosisLabel, Share]
    other: Optional[DiagnosisLabel]
    share: NumberOrNull
    share_se: NumberOrNull
    line: NumberOrNull
    settle_steps: CountOrNull
    block: Count
    resamples: Count


@schema('shape_support')
class ShapeSupport(TypedDict):
    """The shape's support under the block bootstrap of the steady steps
    (traceml/findings/label_support.py, shape_support): the share of resamples the stall
    rule and the shape read as the run's shape, each shape's share, the commonest other,
    about how many more steps would settle it (label_support._shape_settle_steps; null
    where the shape is firm or the model puts it past 64x the run; absent in runs saved
    before it), the block length (steps) and the number of resamples read
    (label_support.SHAPE_SUPPORT_FIRST where those all agreed). null: no shape, too few
    steps, or more than label_support.SHAPE_SUPPORT_MAX_STEPS."""

    label: ShapeLabel
    support: Share
    readings: dict[ShapeLabel, Share]
    other: Optional[ShapeLabel]
    settle_steps: NotRequired[CountOrNull]
    half_support: NotRequired[Annotated[Share, Schema(description=(
        "Borderline only: the leading reading's share of resamples of half the run "
        "(label_support.shape_support); settle_steps is null where the full run's is "
        "not above it."))]]
    block: Count
    resamples: Count


@schema('wait_split')
class WaitSplit(TypedDict):
    """The summed parts of the clocked fetches' input waits (traceml/wait_split.py): the fetches
    counted, their total wait (s), each part's seconds (worker_making, worker_cpu_wait,
    main_cpu, cpu_wait, in_transit where the workers time their batches; main_cpu,
    cpu_wait, asleep otherwise; host_cpu_wait after cpu_wait where the sampler read the
    host; other_threads before in_transit or asleep where the process's CPU clock was
    read; sampler before them where the DataLoader's sampler was timed in the main
    process; transit_cpu_wait before in_transit where the sampler read the workers'
    threads; behind_worker before in_transit where the workers timed their batches;
    others_cpu_wait after other_threads where the sampler read the main process), and
    whether the kernel gave run-queue times."""

    fetches: PositiveInt
    wait_s: NonNegative
    parts_s: dict[WaitPart, NonNegative]
    runq_known: bool
    host_of_workers_s: NotRequired[NonNegative]


class WaitPartsLargest(TypedDict):
    part: WaitPart
    share: Annotated[float, Schema(minimum=0, maximum=1.000001)]
    past_host: NotRequired[Annotated[float, Schema(minimum=0, maximum=1.000001, description=(
        "The host's part (host_cpu_wait), larger, set aside because the rest would still "
        "hold the loop (wait_parts.next_for)."))]]
    sampler_share: NotRequired[Annotated[float, Schema(minimum=0, maximum=1.000001, description=(
        "Where the largest part is main_cpu and the sampler was timed apart: the sampler's "
        "share of the wait."))]]
    sampler_code: NotRequired[Annotated[CodePlace, Schema(description=(
        "Where the largest part is the sampler: its __iter__ (the batch_sampler's, or the "
        "sampler's a torch BatchSampler wraps; wrapping.sampler_code)."))]]


@schema('body_split')
class BodySplit(TypedDict):
    """The summed parts of the clocked steps' bodies, from the batch in hand to the next fetch
    (traceml/wait_split.py body_split): the steps counted, their total compute (s), each
    part's seconds (main_cpu, cpu_wait, off_cpu), and whether the kernel gave run-queue
    times; ``host_share``: the most of the job's waits for a core in those bodies that other
    programs' CPU can account for (evidence.others_in_waits; absent where not read)."""

    steps: PositiveInt
    compute_s: NonNegative
    parts_s: dict[Literal['main_cpu', 'cpu_wait', 'off_cpu'], NonNegative]
    runq_known: bool
    host_share: NotRequired[Share]


class WaitPartsHost(TypedDict):
    others_cpu_s: NonNegative
    job_runq_s: NonNegative
    wall_s: NonNegative
    host_share: Optional[Annotated[float, Schema(minimum=0, maximum=1)]]
    usable_cpus: NotRequired[Annotated[int, Schema(minimum=1, description=(
        "The CPUs the process could run on at the latest epoch's start (any source, a "
        "generator's too): what others_cpu_s / wall_s is a share of."))]]


@schema('wait_parts')
class WaitParts(TypedDict):
    """The measured parts of the input wait (traceml/findings/wait_parts.py): over every clocked
    steady fetch, over the clocked stalls (null: none clocked), the largest part of the
    first with its share of the wait, the parts of the clocked steps' compute (null: no
    body clocked), and what other programs ran against the job's wait for a core in the
    clocked fetches (traceml/evidence.py others_in_waits; null or absent: the host not
    read)."""

    all: WaitSplit
    stalls: Optional[WaitSplit]
    largest: Optional[WaitPartsLargest]
    compute: NotRequired[Optional[BodySplit]]
    host: NotRequired[Optional[WaitPartsHost]]


@schema('summary')
class Summary(TypedDict):
    version: Literal[1]
    source: str
    sources: NotRequired[list[Source]]
    steps: Count
    steady_steps: Count
    epochs: Count
    wall_s: Seconds
    dropped_steps: NotRequired[Count]
    out_of_memory: NotRequired[bool]
    misuse: NotRequired[dict[str, Count]]
    input_wait_s: Durations
    compute_s: Durations
    step_s: Durations
    input_share: ShareOrNull
    diagnosis: Literal['INPUT-BOUND', 'HAND-OVER', 'HOST-BOUND', 'BALANCED', 'COMPUTE-BOUND', 'NO-DATA']
    diagnosis_rule: str
    diagnosis_rule_item: NotRequired[ItemOrNull]
    shape: NotRequired[StringOrNull]
    shape_rule: NotRequired[StringOrNull]
    shape_rule_item: NotRequired[ItemOrNull]
    next: NotRequired[Strings]
    notes: Strings
    stalls: Stalls
    cadence: Cadence
    temporal: NotRequired[Optional[Temporal]]
    concentration: NotRequired[Optional[Concentration]]
    trend: NotRequired[Optional[Trend]]
    trend_not_yet: NotRequired[Optional[TrendNotYet]]
    epoch_start: EpochStart
    loader: Optional[Loader]
    headline: NotRequired[Optional[Headline]]
    stuck: NotRequired[Optional[list[Stuck]]]
    workers: NotRequired[Optional[Workers]]
    host: NotRequired[Optional[Host]]
    delivery: NotRequired[Optional[Delivery]]
    attribution: NotRequired[Optional[Attribution]]
    batch_bytes: NotRequired[Optional[BatchBytes]]
    batch_cost: NotRequired[Annotated[Optional[BatchCost], Schema(description=(
            "Whether the steady batches' make times (worker timing) cost alike, as a "
            "lock-step round's do (findings.attribution.batch_cost): taken with the "
            'attribution; null otherwise.'))]]
    production: NotRequired[Optional[Production]]
    prediction: NotRequired[Optional[Prediction]]
    memory: NotRequired[Optional[Memory]]
    gpu: NotRequired[Optional[Gpu]]
    ranks: NotRequired[Annotated[Optional[Ranks], Schema(description=(
            'Present in a report gathered over many ranks (traceml.gather, '
            "report(ranks='all')): the top level is then the largest input wait across "
            'ranks per aligned step.'))]]
    slow_code: NotRequired[Optional[SlowCode]]
    next_roles: NotRequired[Annotated[list[Literal['why', 'lead', 'also']], Schema(description=(
            "Per line of next: 'why' (what the numbers show), 'lead' (the one next step),"
            " 'also' (a further experiment). Absent in runs saved before it: all read as "
            "'why'."))]]
    diagnosis_support: NotRequired[Optional[DiagnosisSupport]]
    shape_support: NotRequired[Optional[ShapeSupport]]
    wait_parts: NotRequired[Optional[WaitParts]]
    next_items: NotRequired[Items]
    note_items: NotRequired[Items]


class RunFile(TypedDict):
    """Every key that str(report), report._repr_html_(), traceml.compare() and python -m traceml
    read, with its type and range. Keys the readers do not need may be absent; keys not
    named here are allowed and ignored. Numbers are finite (the reader refuses NaN and
    Infinity before this schema runs). Cross-checks against the arrays (indices below the
    step count) are made by traceml.result after this schema."""

    format: Literal['traceml-run']
    format_version: Annotated[Literal[1, 2, 3], Schema(description=(
            '2: the per-step delivery.ranks and delivery.workers are .npy members, not in'
            ' this JSON. 3: next_items, note_items and workers.evidence_items keep the '
            "sentences' codes and numbers, worded again on load; later format 3 files "
            'also keep the rules behind the labels so (item_or_null).'))]
    summary: Summary


# The keywords that open run_schema.json, before RunFile's own.
SCHEMA_HEAD = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "traceml-run-format-3",
    "title": "summary.json of a traceml run file, format versions 1, 2 and 3",
}
