//! GPU threads' stacks on the CPU: one lazily mapped region per coroutine with a guard region
//! below it, and a `SIGSEGV` handler that turns a fault in a guard region into a message
//! naming the kernel, its block and thread, and [`CpuExecutor::with_stack_size`].
//!
//! A stack is reserved with `mmap(MAP_NORESERVE)`: the default of [`DEFAULT_STACK_SIZE`]
//! costs address space, and memory only for the pages a thread touches (a kernel without big
//! local arrays touches one or two). Measured on the 2-core build machine: the first
//! 1024-thread block of a fresh executor (which maps the 1024 stacks) took 9.8 ms with 16 MiB
//! stacks and 5.4 ms with 256 KiB ones; later blocks reuse the stacks (0.17 ms per block with
//! either size); see `a_block_of_1024_threads_starts_quickly_with_the_default_stacks`.
//!
//! A stack overflow cannot be turned into a `CpuError`: it is detected by a signal, the
//! overflowing code may be anywhere (in the allocator, holding a lock), and Rust cannot unwind
//! out of a signal handler. So the handler prints what overflowed and how to raise the stack,
//! then aborts the process. It runs on an alternate signal stack (the overflowed one has no
//! room), which every worker thread gets if it has none. Faults that are not in a GPU
//! thread's guard region go to the handler installed before (the Rust runtime's own, which
//! reports a main-thread overflow, or the default action).
//!
//! [`CpuExecutor::with_stack_size`]: super::CpuExecutor::with_stack_size

/// Default size of each GPU thread's coroutine stack: 16 MiB of address space, mapped lazily
/// (only touched pages cost memory), so local arrays of a few MiB work as on a GPU.
pub const DEFAULT_STACK_SIZE: usize = 16 << 20;

/// Bytes of inaccessible memory below every stack: a frame bigger than this that skips it
/// entirely is not caught (Rust's stack probes touch every page, so Rust frames never do).
#[cfg(unix)]
const GUARD_BYTES: usize = 64 << 10;

#[cfg(unix)]
pub(crate) use unix::{GuardedStack as ThreadStack, ensure_signal_stack, install_overflow_handler, set_running};

#[cfg(not(unix))]
pub(crate) use corosensei::stack::DefaultStack as ThreadStack;
#[cfg(not(unix))]
pub(crate) fn set_running(_: Option<Running>) {}
#[cfg(not(unix))]
pub(crate) fn ensure_signal_stack() {}
#[cfg(not(unix))]
pub(crate) fn install_overflow_handler() {}

/// `[start, end)` of `stack`'s guard region (`(0, 0)` where there is no overflow handler).
pub(crate) fn guard_of(stack: &ThreadStack) -> (usize, usize) {
    #[cfg(unix)]
    return stack.guard();
    #[cfg(not(unix))]
    {
        let _ = stack;
        (0, 0)
    }
}

/// The GPU thread running on an OS thread, as the overflow handler reports it.
#[derive(Clone, Copy)]
pub(crate) struct Running {
    /// `[start, end)` of the running coroutine's guard region (`(0, 0)`: none).
    pub(crate) guard: (usize, usize),
    /// Bytes of its stack.
    pub(crate) stack_size: usize,
    /// The kernel's name (pointer and length of a `&str` that outlives the launch's run).
    pub(crate) kernel: (*const u8, usize),
    /// `blockIdx`.
    pub(crate) block: [u32; 3],
    /// `threadIdx`.
    pub(crate) thread: [u32; 3],
}

impl Running {
    #[cfg_attr(not(unix), allow(dead_code))]
    const NONE: Running = Running { guard: (0, 0), stack_size: 0, kernel: (core::ptr::null(), 0), block: [0; 3], thread: [0; 3] };
}

/// Maps a stack of `size` bytes.
pub(crate) fn new_stack(size: usize) -> std::io::Result<ThreadStack> {
    ThreadStack::new(size)
}

/// A pool of coroutine stacks, reused across threads and blocks (each is an `mmap`).
pub(crate) struct StackPool {
    stacks: Vec<ThreadStack>,
    stack_size: usize,
}

impl StackPool {
    pub(crate) fn new(stack_size: usize) -> Self {
        StackPool { stacks: Vec::new(), stack_size }
    }

    pub(crate) fn take(&mut self) -> ThreadStack {
        self.stacks.pop().unwrap_or_else(|| {
            new_stack(self.stack_size).unwrap_or_else(|e| {
                panic!(
                    "the CPU executor could not map a {} KiB coroutine stack: {e}; \
                     lower it with `CpuExecutor::with_stack_size` or run fewer workers",
                    self.stack_size / 1024
                )
            })
        })
    }

    pub(crate) fn give(&mut self, stack: ThreadStack) {
        self.stacks.push(stack);
    }
}

#[cfg(unix)]
mod unix {
    use core::cell::Cell;
    use core::fmt::Write;
    use std::io;
    use std::sync::Once;
    use std::sync::atomic::{AtomicPtr, Ordering};

    use corosensei::stack::{Stack, StackPointer};

    use super::{GUARD_BYTES, Running};

    fn page_size() -> usize {
        // SAFETY: `sysconf` has no preconditions.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if size > 0 { size as usize } else { 4096 }
    }

    /// A coroutine stack: `mmap`ed without reserving swap, readable and writable above a
    /// `GUARD_BYTES` inaccessible region.
    pub(crate) struct GuardedStack {
        /// Start of the mapping (the guard region's first byte).
        start: usize,
        /// Length of the whole mapping.
        len: usize,
    }

    // SAFETY: a plain memory region; ownership moves with the value.
    unsafe impl Send for GuardedStack {}

    impl GuardedStack {
        pub(crate) fn new(size: usize) -> io::Result<Self> {
            let page = page_size();
            let usable = size.max(corosensei::stack::MIN_STACK_SIZE).next_multiple_of(page);
            let guard = GUARD_BYTES.next_multiple_of(page);
            let len = usable.checked_add(guard).ok_or_else(|| io::Error::other("stack size overflows usize"))?;
            // SAFETY: an anonymous private mapping at an address the kernel picks.
            let start =
                unsafe { libc::mmap(core::ptr::null_mut(), len, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0) };
            if start == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            let stack = GuardedStack { start: start as usize, len };
            // SAFETY: the range above the guard lies inside the mapping just made.
            if unsafe { libc::mprotect((stack.start + guard) as *mut libc::c_void, usable, libc::PROT_READ | libc::PROT_WRITE) } != 0 {
                return Err(io::Error::last_os_error()); // `stack` unmaps on drop
            }
            Ok(stack)
        }

        /// `[start, end)` of the guard region.
        pub(crate) fn guard(&self) -> (usize, usize) {
            (self.start, self.start + GUARD_BYTES.next_multiple_of(page_size()))
        }

        /// Usable bytes.
        #[cfg(test)]
        pub(crate) fn size(&self) -> usize {
            self.len - (self.guard().1 - self.start)
        }
    }

    impl Drop for GuardedStack {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `new`, no longer used by any coroutine (a stack is
            // dropped only after its coroutine finished).
            unsafe { libc::munmap(self.start as *mut libc::c_void, self.len) };
        }
    }

    // SAFETY: `base` and `limit` bound a writable region of at least MIN_STACK_SIZE bytes,
    // with an inaccessible guard region below `limit`, for as long as the value lives.
    unsafe impl Stack for GuardedStack {
        fn base(&self) -> StackPointer {
            StackPointer::new(self.start + self.len).expect("a mapping is never at address 0")
        }

        fn limit(&self) -> StackPointer {
            StackPointer::new(self.guard().1).expect("a mapping is never at address 0")
        }
    }

    thread_local! {
        static RUNNING: Cell<Running> = const { Cell::new(Running::NONE) };
        /// This thread's alternate signal stack, if the executor had to make one.
        static SIGNAL_STACK: SignalStack = const { SignalStack { start: Cell::new(0), len: Cell::new(0) } };
    }

    /// Records the GPU thread about to run on this OS thread (`None`: none runs).
    pub(crate) fn set_running(running: Option<Running>) {
        RUNNING.with(|r| r.set(running.unwrap_or(Running::NONE)));
    }

    struct SignalStack {
        start: Cell<usize>,
        len: Cell<usize>,
    }

    impl Drop for SignalStack {
        fn drop(&mut self) {
            if self.start.get() == 0 {
                return;
            }
            let disable = libc::stack_t { ss_sp: core::ptr::null_mut(), ss_flags: libc::SS_DISABLE, ss_size: 0 };
            // SAFETY: switches off this thread's alternate stack (ours) before unmapping it.
            unsafe {
                libc::sigaltstack(&disable, core::ptr::null_mut());
                libc::munmap(self.start.get() as *mut libc::c_void, self.len.get());
            }
        }
    }

    /// Gives this OS thread an alternate signal stack if it has none (the Rust runtime gives
    /// its own threads one; threads made by other code may not have one).
    pub(crate) fn ensure_signal_stack() {
        let mut current = libc::stack_t { ss_sp: core::ptr::null_mut(), ss_flags: 0, ss_size: 0 };
        // SAFETY: queries this thread's alternate stack.
        if unsafe { libc::sigaltstack(core::ptr::null(), &mut current) } != 0 || current.ss_flags & libc::SS_DISABLE == 0 {
            return;
        }
        let len = (64 << 10).max(libc::SIGSTKSZ);
        // SAFETY: an anonymous private mapping.
        let start = unsafe { libc::mmap(core::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) };
        if start == libc::MAP_FAILED {
            return;
        }
        let stack = libc::stack_t { ss_sp: start, ss_flags: 0, ss_size: len };
        // SAFETY: `stack` is a fresh mapping that the thread-local unmaps at thread exit,
        // after switching the alternate stack off.
        if unsafe { libc::sigaltstack(&stack, core::ptr::null_mut()) } == 0 {
            SIGNAL_STACK.with(|s| {
                s.start.set(start as usize);
                s.len.set(len);
            });
        } else {
            // SAFETY: not installed, so unused.
            unsafe { libc::munmap(start, len) };
        }
    }

    /// The handlers that were installed before ours, for faults that are not ours.
    static PREVIOUS_SEGV: AtomicPtr<libc::sigaction> = AtomicPtr::new(core::ptr::null_mut());
    static PREVIOUS_BUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(core::ptr::null_mut());

    /// Installs the guard-region handler for `SIGSEGV` and `SIGBUS` (once per process).
    pub(crate) fn install_overflow_handler() {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            for (signal, previous) in [(libc::SIGSEGV, &PREVIOUS_SEGV), (libc::SIGBUS, &PREVIOUS_BUS)] {
                // SAFETY: a zeroed `sigaction` is a valid value to fill in.
                let mut action: libc::sigaction = unsafe { core::mem::zeroed() };
                action.sa_sigaction = on_fault as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                // SAFETY: `sa_mask` is a valid signal set to empty.
                unsafe { libc::sigemptyset(&mut action.sa_mask) };
                // SAFETY: as above; filled by `sigaction` with the old action.
                let old: &'static mut libc::sigaction = Box::leak(Box::new(unsafe { core::mem::zeroed() }));
                // SAFETY: valid pointers to a complete action and to room for the old one.
                if unsafe { libc::sigaction(signal, &action, old) } == 0 {
                    previous.store(old, Ordering::Release);
                }
            }
        });
    }

    /// A fixed buffer the handler formats into (no allocation in a signal handler).
    struct Message {
        bytes: [u8; 768],
        len: usize,
    }

    impl Write for Message {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            let n = s.len().min(self.bytes.len() - self.len);
            self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
            self.len += n;
            Ok(())
        }
    }

    extern "C" fn on_fault(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid `siginfo_t` to an SA_SIGINFO handler.
        let address = unsafe { (*info).si_addr() } as usize;
        let running = RUNNING.with(|r| r.get());
        if running.guard.0 <= address && address < running.guard.1 {
            report_overflow(&running);
        }
        let previous = if signal == libc::SIGBUS { &PREVIOUS_BUS } else { &PREVIOUS_SEGV };
        let previous = previous.load(Ordering::Acquire);
        // SAFETY: set once by `install_overflow_handler` to a leaked, never-freed action.
        match unsafe { previous.as_ref() } {
            Some(old) if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN => {
                if old.sa_flags & libc::SA_SIGINFO != 0 {
                    // SAFETY: an SA_SIGINFO handler takes these three arguments.
                    let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = unsafe { core::mem::transmute(old.sa_sigaction) };
                    handler(signal, info, context);
                } else {
                    // SAFETY: a plain handler takes the signal number.
                    let handler: extern "C" fn(libc::c_int) = unsafe { core::mem::transmute(old.sa_sigaction) };
                    handler(signal);
                }
            }
            _ => {
                // Default action: restore it and return; the faulting instruction faults
                // again and the process ends as it would have without us.
                // SAFETY: resets the disposition of a signal.
                unsafe { libc::signal(signal, libc::SIG_DFL) };
            }
        }
    }

    #[cold]
    fn report_overflow(running: &Running) -> ! {
        let kernel = if running.kernel.0.is_null() {
            "?"
        } else {
            // SAFETY: the kernel name of the launch now running (it outlives the launch), as
            // recorded by `set_running`; UTF-8 since it was a `&str`.
            unsafe { core::str::from_utf8_unchecked(core::slice::from_raw_parts(running.kernel.0, running.kernel.1)) }
        };
        let mut m = Message { bytes: [0; 768], len: 0 };
        let [bx, by, bz] = running.block;
        let [tx, ty, tz] = running.thread;
        let _ = write!(
            m,
            "\nferrocuda CPU executor: kernel `{kernel}` overflowed its stack in block ({bx}, {by}, {bz}), thread ({tx}, {ty}, {tz}): \
             each GPU thread has {} KiB of stack (a large local array or deep recursion needs more). \
             Raise it with `CpuExecutor::new().with_stack_size(bytes)` (stacks are mapped lazily, so a large size costs little memory). \
             Aborting the process: a stack overflow is caught by a signal, which cannot return an error.\n",
            running.stack_size / 1024
        );
        // SAFETY: writes bytes of a live buffer to stderr, then aborts (both async-signal-safe).
        unsafe {
            libc::write(2, m.bytes.as_ptr().cast(), m.len);
            libc::abort();
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// Creating one block's worth of stacks (1024) costs about the same at 16 MiB as at
    /// 256 KiB, since only the mapping is made; printed for the record.
    #[test]
    fn a_block_of_lazily_mapped_stacks_is_cheap_to_create() {
        for size in [256 << 10, DEFAULT_STACK_SIZE] {
            let start = std::time::Instant::now();
            let stacks: Vec<_> = (0..1024).map(|_| new_stack(size).expect("map a stack")).collect();
            let elapsed = start.elapsed();
            println!("1024 stacks of {} KiB: {elapsed:?}", size / 1024);
            assert!(elapsed < std::time::Duration::from_secs(2), "mapping 1024 stacks of {} KiB took {elapsed:?}", size / 1024);
            drop(stacks);
        }
    }

    #[test]
    fn a_stack_has_its_guard_region_below_its_limit() {
        use corosensei::stack::Stack;
        let stack = new_stack(100_000).unwrap();
        let (guard_start, guard_end) = stack.guard();
        assert_eq!(guard_end, stack.limit().get());
        assert!(guard_end - guard_start >= GUARD_BYTES);
        assert!(stack.size() >= 100_000);
        assert_eq!(stack.base().get() - stack.limit().get(), stack.size());
    }
}
