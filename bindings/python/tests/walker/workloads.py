"""Functions the walker tests sample. Each busy loop sits on ONE line (marked
`# MARK:<tag>`), so every sample taken inside it must carry that line.
Loops whose clock check is on that same line run for `seconds` of this
thread's CPU (time.thread_time), not of wall time: on a loaded machine a
thread gets a sliver of a CPU, and the on-CPU samples the tests count follow
the CPU it used, so they still get them (the test just takes longer). Loops
with the check on a line of its own keep time.perf_counter: thread_time is
a system call, and a loaded machine preempts threads on their way back from
one, so that line would get a third of the samples (measured on 3.10:
gen_work 143 of 412, coro_work 156 of 423)."""
import asyncio
import time


def busy_known(seconds):
    stop = time.thread_time() + seconds
    x = 0
    while time.thread_time() < stop: x += 1  # MARK:busy_known
    return x


def gen_work(seconds):
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop:
        x = 0
        while x < 20000: x += 1  # MARK:gen_work
        yield x


def drive_gen(seconds):
    n = 0
    for _ in gen_work(seconds):  # MARK:drive_gen
        n += 1
    return n


async def coro_work(seconds):
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop:
        x = 0
        while x < 20000: x += 1  # MARK:coro_work
        await asyncio.sleep(0)


spin_lambda = lambda seconds: busy_known(seconds)  # MARK:lambda


class Klass:
    def method(self, seconds):
        stop = time.thread_time() + seconds
        x = 0
        while time.thread_time() < stop: x += 1  # MARK:method
        return x


def café_naïve(seconds):
    stop = time.thread_time() + seconds
    x = 0
    while time.thread_time() < stop: x += 1  # MARK:latin1
    return x


def 計算する(seconds):
    stop = time.thread_time() + seconds
    x = 0
    while time.thread_time() < stop: x += 1  # MARK:cjk
    return x


def 𠀋_ext_b(seconds):
    stop = time.thread_time() + seconds
    x = 0
    while time.thread_time() < stop: x += 1  # MARK:astral
    return x


def recurse(n, seconds):
    if n == 0:
        return busy_known(seconds)  # MARK:recurse_base
    return recurse(n - 1, seconds)  # MARK:recurse


def spinner(stop_event):
    x = 0
    while not stop_event.is_set(): x += 1  # MARK:spinner
    return x


def sleeper(ready, wake):
    ready.set()
    wake.wait()  # MARK:sleeper


def short_worker(n):
    x = 0
    while x < n: x += 1  # MARK:short_worker
    return x


def tiny(n):
    x = 0
    while x < n: x += 1  # MARK:tiny
    return x


def many_lines(seconds):
    """Stays in one frame while moving between twelve call sites, more
    instructions than the walker remembers per code object."""
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop:
        tiny(300)  # MARK:site0
        tiny(300)  # MARK:site1
        tiny(300)  # MARK:site2
        tiny(300)  # MARK:site3
        tiny(300)  # MARK:site4
        tiny(300)  # MARK:site5
        tiny(300)  # MARK:site6
        tiny(300)  # MARK:site7
        tiny(300)  # MARK:site8
        tiny(300)  # MARK:site9
        tiny(300)  # MARK:site10
        tiny(300)  # MARK:site11
