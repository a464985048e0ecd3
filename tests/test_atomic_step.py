"""A compiled step that updates Parameters is all or nothing (docs/training.md "Interrupted steps").

Interrupted at every launch point of a training step (Momentum and AdamWeightDecay nets, fused and
unfused, with and without a loss-scale cell), every Parameter and optimizer state equals, bit for bit,
either the state before the step or the state after it: a KeyboardInterrupt raised by an observer
(before the first Parameter write: the state before; from it on: held until the step ends, the state
after), a real SIGINT sent from inside the step (handled after the step: the state after), a host op
raising after the first write (the copies taken before are put back). Model.train's step counter
matches the Parameters when a step is cut short; real SIGINTs at random moments into a process looping
over steps never leave a state that is not that of a whole number of steps.
"""
import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import graphkernel as ms
from graphkernel import Tensor, context, nn, ops
from graphkernel.ops import operations as P
from graphkernel.observation import launches as observe
from graphkernel.settings.interrupts import HELD, committed_steps
from graphkernel.train import Callback, Model, NumpySlicesDataset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Mlp(nn.Cell):
    def __init__(self, norm: bool):
        super().__init__()
        self.d1 = nn.Dense(8, 16)
        self.norm = nn.LayerNorm((16,)) if norm else None
        self.act = nn.GELU() if norm else nn.ReLU()
        self.d2 = nn.Dense(16, 4)

    def construct(self, x):
        h = self.d1(x)
        if self.norm is not None:
            h = self.norm(h)
        return self.d2(self.act(h))


def _train_cell(optimizer: str, loss_scale: bool):
    ms.set_seed(0)
    net = nn.WithLossCell(Mlp(norm=optimizer == "adamw"), nn.MSELoss())
    params = net.trainable_params()
    opt = nn.Momentum(params, 0.01, 0.9) if optimizer == "momentum" else nn.AdamWeightDecay(params, 0.01,
                                                                                           weight_decay=0.01)
    if loss_scale:
        return nn.TrainOneStepWithLossScaleCell(net, opt, nn.DynamicLossScaleUpdateCell(2.0 ** 10, 2, 3))
    return nn.TrainOneStepCell(net, opt)


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    return Tensor(rng.standard_normal((4, 8)).astype(np.float32)), Tensor(rng.standard_normal((4, 4)).astype(np.float32))


def _state(cell) -> list[np.ndarray]:
    return [p.asnumpy() for p in cell.get_parameters()]


def _set_state(cell, state) -> None:
    for p, a in zip(cell.get_parameters(), state):
        p.set_data(a)


def _same(a, b) -> bool:
    return all(x.dtype == y.dtype and x.tobytes() == y.tobytes() for x, y in zip(a, b))


class InterruptAt:
    """A sink that interrupts the step at launch `index`: raises KeyboardInterrupt, or sends SIGINT."""

    def __init__(self, index: int, how: str):
        self.index, self.how, self.fired = index, how, False

    def begin_step(self, compiled, step):
        pass

    def end_step(self, compiled, step, seconds, count):
        pass

    def kernel(self, compiled, step, launch, inputs, outputs, seconds):
        if launch.index == self.index:
            self.fired = True
            if self.how == "raise":
                raise KeyboardInterrupt(f"at launch {self.index}")
            os.kill(os.getpid(), signal.SIGINT)


class Ran(InterruptAt):
    """A sink noting the launches of a step."""

    def __init__(self):
        super().__init__(-1, "")
        self.indices = []

    def kernel(self, compiled, step, launch, inputs, outputs, seconds):
        self.indices.append(launch.index)


def _interrupt_every_launch(cell, x, y):
    """For each launch point and each way: the state after the interrupted step is the state before or
    after, bit for bit; returns the commit point and what each interruption left ("B" or "A")."""
    cell(x, y)   # compiled, one step in
    compiled = cell.compile(x, y)
    obs = observe.observation(compiled)
    start = _state(cell)
    ran = Ran()
    obs.sinks.append(ran)
    cell(x, y)   # the launches a step makes (an If runs one of its branches)
    obs.sinks.remove(ran)
    after_one = _state(cell)
    _set_state(cell, start)
    left = {}
    for how in ("raise", "signal"):
        marks = []
        for k in ran.indices:
            sink = InterruptAt(k, how)
            obs.sinks.append(sink)
            try:
                with pytest.raises(KeyboardInterrupt):
                    cell(x, y)
            finally:
                obs.sinks.remove(sink)
            assert sink.fired
            state = _state(cell)
            if _same(state, start):
                marks.append("B")
            else:
                assert _same(state, after_one), f"{how} at launch {k}: a state neither before nor after the step"
                marks.append("A")
            _set_state(cell, start)
        left[how] = "".join(marks)
    commit = compiled.commit
    expected = "".join("B" if commit.launch is not None and k < commit.launch else "A" for k in ran.indices)
    return commit, left, expected


def _matrix(default: set):
    """optimizer x fusion x loss scale; the combinations outside `default` run with --runslow (each
    compiles kernels of its own), those in it are a grid (the README's command takes a share)."""
    cases = []
    for optimizer in ("momentum", "adamw"):
        for fusion in (True, False):
            for loss_scale in (False, True):
                key = (optimizer, fusion, loss_scale)
                cases.append(pytest.param(*key, id=f"{optimizer}-{'fused' if fusion else 'unfused'}-"
                                                   f"{'loss_scale' if loss_scale else 'plain'}",
                                          marks=pytest.mark.grid if key in default else pytest.mark.slow))
    return cases


# each factor both ways by default: every launch point of these four steps
EVERY_FACTOR = {("momentum", True, False), ("momentum", False, True), ("adamw", True, True), ("adamw", False, False)}


@pytest.mark.parametrize("optimizer,fusion,loss_scale", _matrix(EVERY_FACTOR))
def test_an_interrupt_at_any_launch_leaves_the_state_before_or_after(optimizer, fusion, loss_scale):
    context.set_context(device_target="Ascend", enable_graph_kernel=fusion)
    cell = _train_cell(optimizer, loss_scale)
    commit, left, expected = _interrupt_every_launch(cell, *_batch())
    assert commit.launch is not None and not commit.may_raise
    # an exception before the first Parameter write stops the step; from it on the step runs to its end
    assert left["raise"] == expected and "B" in expected and "A" in expected
    assert left["signal"] == "A" * len(expected)   # a signal waits for the end of the step


def test_on_the_reference_an_interrupt_leaves_the_state_before_or_after(cpu):
    cell = _train_cell("adamw", loss_scale=True)
    commit, left, _ = _interrupt_every_launch(cell, *_batch())
    assert commit.launch is None   # the reference writes the Parameters after its last launch
    assert set(left["raise"]) == {"B"} and set(left["signal"]) == {"A"}


class ProbedStep(nn.TrainOneStepCell):
    """A train step with a host op after the optimizer's updates (it reads an updated weight), which
    raises when `fail` is set: a launch after the commit point that can raise."""

    def __init__(self, network, optimizer, where: str):
        super().__init__(network, optimizer)
        self.fail, self.where = False, where
        w = self.weights[0]
        self.probe = P.PyFunc(self._probe, [w.dtype], [w.shape], [w.dtype], [w.shape])

    def _probe(self, w):
        if self.fail:
            raise RuntimeError("the probe failed")
        return w.copy()

    def construct(self, x, y):
        probe = self.probe(self.weights[0]) if self.where == "before" else None
        loss = self.network(x, y)
        grads = self.grad(self.network, self.weights)(x, y, self._fill(loss, self.sens))
        self.optimizer(grads)
        if self.where == "after":
            probe = self.probe(self.weights[0])
        return loss + P.ReduceSum()(probe, ()) * 0.0


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_a_host_op_raising_inside_the_step_leaves_the_state_before(where, fusion):
    context.set_context(device_target="Ascend", enable_graph_kernel=fusion, mix_compile_mode=True)
    ms.set_seed(0)
    net = nn.WithLossCell(Mlp(norm=False), nn.MSELoss())
    cell = ProbedStep(net, nn.Momentum(net.trainable_params(), 0.01, 0.9), where)
    x, y = _batch()
    cell(x, y)
    compiled = cell.compile(x, y)
    assert compiled.commit.may_raise == (where == "after")   # a copy of the Parameters only when needed
    start = _state(cell)
    cell.fail = True
    with pytest.raises(Exception, match="the probe failed"):
        cell(x, y)
    assert _same(_state(cell), start)
    cell.fail = False
    cell(x, y)
    assert not _same(_state(cell), start)
    assert int(cell.optimizer.global_step.asnumpy()[0]) == 2


class UpdateThenScatter(nn.Cell):
    """p += x, then a scatter-add of the new p: UnsortedSegmentSum after the first Parameter write,
    where an embedding table's gradient comes in a training step."""

    def __init__(self):
        super().__init__()
        self.p = ms.Parameter(Tensor(np.zeros((5, 3), np.float32)), name="p")

    def construct(self, x, ids):
        new = self.p + x
        ops.assign(self.p, new)
        return P.UnsortedSegmentSum()(new * 2.0, ids, 4)


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
def test_a_scatter_after_the_first_parameter_write_needs_no_copy_of_the_parameters(fusion):
    """The scatter-add skips ids out of range instead of raising: a step with one after its commit
    point keeps no copy of every Parameter (a BERT-large step with its embedding table's gradient
    copied the whole model and its optimizer state, ~4 GB, every step)."""
    context.set_context(device_target="Ascend", enable_graph_kernel=fusion)
    cell = UpdateThenScatter()
    x, ids = np.arange(15, dtype=np.float32).reshape(5, 3), np.array([0, 2, 2, 9, -1], np.int32)
    for step in (1, 2):
        got = cell(Tensor(x), Tensor(ids)).asnumpy()
        want = np.zeros((4, 3), np.float32)
        for row, s in zip(2.0 * step * x, ids):
            if 0 <= s < 4:
                want[s] += row
        np.testing.assert_array_equal(got, want)
    compiled = cell.compile(Tensor(x), Tensor(ids))
    assert compiled.commit.launch == 0 and not compiled.commit.may_raise and not compiled._snapshot


def test_signals_are_held_to_the_end_of_the_outermost_block():
    seen = []
    previous = signal.signal(signal.SIGALRM, lambda s, f: seen.append(s))
    try:
        with HELD:
            with HELD:
                os.kill(os.getpid(), signal.SIGALRM)
                os.kill(os.getpid(), signal.SIGALRM)   # twice: handled once, as a pending signal is
            assert seen == []
        assert seen == [signal.SIGALRM]
        assert signal.getsignal(signal.SIGALRM) is not None and seen   # the handler is back
        os.kill(os.getpid(), signal.SIGALRM)
        assert seen == [signal.SIGALRM] * 2
        with pytest.raises(KeyboardInterrupt):
            with HELD:
                os.kill(os.getpid(), signal.SIGINT)
                seen.append("inside")   # the interrupt did not stop the block
        assert seen[-1] == "inside" and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_another_thread_holds_nothing():
    handler = signal.getsignal(signal.SIGINT)
    inside = []

    def run():
        with HELD:
            inside.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert inside == [handler]


class StopAt(Callback):
    """Interrupts training at step `step`: from the step-begin callback, or from inside the step."""

    def __init__(self, step: int, where: str, cell, compiled_launch=None):
        self.step, self.where, self.cell, self.launch = step, where, cell, compiled_launch
        self.cb = None

    def on_train_step_begin(self, run_context):
        self.cb = run_context.original_args()
        if self.cb.cur_step_num != self.step:
            return
        if self.where == "callback":
            raise KeyboardInterrupt
        compiled = self.cell.compile(*self.cb.train_dataset_element)
        observe.observation(compiled).sinks.append(InterruptAt(self.launch(compiled), "raise"))


@pytest.mark.parametrize("where", ["callback", "before_commit", "after_commit"])
def test_model_train_counts_the_steps_the_parameters_hold(where):
    context.set_context(device_target="Ascend", enable_graph_kernel=True)
    ms.set_seed(0)
    net = Mlp(norm=False)
    opt = nn.Momentum(net.trainable_params(), 0.01, 0.9)
    model = Model(net, nn.MSELoss(), opt)
    rng = np.random.default_rng(0)
    data = NumpySlicesDataset((rng.standard_normal((24, 8)).astype(np.float32),
                               rng.standard_normal((24, 4)).astype(np.float32))).batch(4)
    launch = {"callback": None, "before_commit": lambda c: c.commit.launch - 1,
              "after_commit": lambda c: c.commit.launch}[where]
    stop = StopAt(9, where, model.train_network, launch)
    before = committed_steps()
    with pytest.raises(KeyboardInterrupt):
        model.train(3, data, callbacks=[stop])
    done = int(opt.global_step.asnumpy()[0])
    assert done == (9 if where == "after_commit" else 8)
    assert stop.cb.cur_step_num == done == committed_steps() - before
    assert stop.cb.cur_epoch_num == 2


def test_model_train_counts_the_steps_of_a_sink_cut_short():
    context.set_context(device_target="Ascend", enable_graph_kernel=True)
    ms.set_seed(0)
    net = Mlp(norm=False)
    opt = nn.Momentum(net.trainable_params(), 0.01, 0.9)
    model = Model(net, nn.MSELoss(), opt)
    rng = np.random.default_rng(0)
    data = NumpySlicesDataset((rng.standard_normal((24, 8)).astype(np.float32),
                               rng.standard_normal((24, 4)).astype(np.float32))).batch(4)

    class StopInSink(Callback):
        def on_train_step_begin(self, run_context):
            self.cb = run_context.original_args()
            if self.cb.cur_epoch_num == 2:   # the second sink stops in its fourth step, before its commit
                compiled = model.train_network.compile(*self.cb.train_dataset_element)
                obs = observe.observation(compiled)
                count = {"n": 0}

                class Fourth(InterruptAt):
                    def kernel(self, compiled, step, launch, inputs, outputs, seconds):
                        count["n"] += launch.index == 0
                        if count["n"] == 4:
                            super().kernel(compiled, step, launch, inputs, outputs, seconds)

                obs.sinks.append(Fourth(compiled.commit.launch - 1, "raise"))

    stop = StopInSink()
    with pytest.raises(KeyboardInterrupt):
        model.train(3, data, callbacks=[stop], dataset_sink_mode=True)
    assert int(opt.global_step.asnumpy()[0]) == 6 + 3 == stop.cb.cur_step_num


CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import graphkernel as ms
    from graphkernel import Tensor, context, nn, ops
    from tests.test_atomic_step import _batch, _same, _state, _train_cell

    optimizer, fusion, wanted = sys.argv[1], sys.argv[2] == "fused", int(sys.argv[3])
    context.set_context(device_target="Ascend", enable_graph_kernel=fusion, deterministic=1)
    x, y = _batch()
    cell = _train_cell(optimizer, loss_scale=False)
    cell(x, y)
    caught = []
    while len(caught) < wanted:
        try:
            print("stepping", flush=True)   # the parent sends one SIGINT per line it reads
            while True:
                cell(x, y)
        except KeyboardInterrupt:
            caught.append(_state(cell))
    # each state must be that of a whole number of steps: the one its global_step says
    step_of = lambda state: int(state[[p.name for p in cell.get_parameters()].index("global_step")][0])
    replay = _train_cell(optimizer, loss_scale=False)
    steps = sorted({step_of(s) for s in caught})
    bad = []
    for n in range(1, steps[-1] + 1):
        replay(x, y)
        if n in steps:
            bad += [n for s in caught if step_of(s) == n and not _same(s, _state(replay))]
    print("torn", len(bad), "of", len(caught), "at steps", bad[:5], flush=True)
""")


@pytest.mark.parametrize("optimizer,fusion", [("momentum", "fused"), ("adamw", "unfused")])
def test_real_sigints_at_random_moments_never_tear_a_step(optimizer, fusion):
    child = subprocess.Popen([sys.executable, "-c", CHILD, optimizer, fusion, "40"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
    watchdog = threading.Timer(300, child.kill)   # a SIGINT the child never answers fails the test, no hang
    watchdog.start()
    try:
        for k in range(40):
            line = child.stdout.readline().strip()
            assert line == "stepping", f"no answer to SIGINT {k} within 300 s: {child.stderr.read()}"
            threading.Event().wait(rng.uniform(0, 0.004))
            child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=300)
    finally:
        watchdog.cancel()
        child.kill()
        child.wait()
    assert child.returncode == 0, err
    assert out.startswith("torn 0 of 40"), out
