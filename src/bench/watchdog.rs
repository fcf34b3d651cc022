//! A cell's process ends with the `bench` that started it. Its stdin is a pipe the parent never
//! writes; the kernel closes the parent's end when the parent ends, however it ends (`kill -9`
//! included), and a read here then returns. A second thread watches the parent's PID too (a
//! process whose parent ends is handed to another), in case the pipe's far end outlives it.
//! Either way the cell stops at once, so two processes never measure one cell on the same files.

use std::io::Read;
use std::time::Duration;

/// How often the parent's PID is looked at.
const POLL: Duration = Duration::from_millis(200);

/// Ends this process with one error line (the cell's log is its stderr).
fn end(why: &str) -> ! {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "error: the bench that started this cell ended ({why}); the cell stops with it"
    );
    std::process::exit(1)
}

/// Starts the two watching threads; returns at once.
pub(crate) fn end_with_parent() {
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(|| {
        let mut buf = [0u8; 64];
        let mut stdin = std::io::stdin().lock();
        loop {
            match stdin.read(&mut buf) {
                Ok(0) => end("its pipe closed"),
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => end(&format!("its pipe cannot be read: {e}")),
            }
        }
    });
    std::thread::spawn(move || loop {
        std::thread::sleep(POLL);
        if std::os::unix::process::parent_id() != parent {
            end("this process was handed to another parent");
        }
    });
}
