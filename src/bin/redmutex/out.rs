//! Where the tool writes: standard output through one locked, buffered handle that goes
//! quiet once its reader has gone (`redmutex locks | head -1`), as Unix tools do, and
//! standard error, whose failures are ignored. Nothing here panics on a closed stream.

use std::io::{self, BufWriter, StdoutLock, Write};

/// Standard output. A closed pipe ends the output quietly: the rest is dropped and the
/// command keeps its exit code. Any other write error is kept for [`Out::finish`].
pub struct Out {
    stdout: BufWriter<StdoutLock<'static>>,
    state: State,
}

enum State {
    Open,
    /// The reader has gone: nothing more is written.
    Closed,
    /// A write failed otherwise (a full disk): nothing more is written.
    Failed(io::Error),
}

impl Out {
    /// Standard output, locked for the life of the process.
    pub fn new() -> Out {
        Out {
            stdout: BufWriter::new(io::stdout().lock()),
            state: State::Open,
        }
    }

    /// Writes `text` and a newline, unless the output has ended.
    pub fn line(&mut self, text: &str) {
        if let State::Open = self.state {
            let written = (self.stdout.write_all(text.as_bytes()))
                .and_then(|()| self.stdout.write_all(b"\n"));
            self.note(written);
        }
    }

    /// Flushes what is buffered; the error of a write that failed other than on a closed
    /// pipe.
    pub fn finish(mut self) -> io::Result<()> {
        if let State::Open = self.state {
            let flushed = self.stdout.flush();
            self.note(flushed);
        }
        match std::mem::replace(&mut self.state, State::Closed) {
            State::Failed(err) => Err(err),
            State::Open | State::Closed => Ok(()),
        }
    }

    fn note(&mut self, written: io::Result<()>) {
        match written {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::BrokenPipe => self.state = State::Closed,
            Err(err) => self.state = State::Failed(err),
        }
    }
}

/// Writes `redmutex: ` and `text` as a line on standard error; a closed standard error is
/// ignored.
pub fn say(text: &str) {
    let _ = writeln!(io::stderr().lock(), "redmutex: {text}");
}

/// Writes `text` on standard error without a newline, for a question; a closed standard
/// error is ignored.
pub fn ask(text: &str) {
    let mut stderr = io::stderr().lock();
    let _ = stderr
        .write_all(text.as_bytes())
        .and_then(|()| stderr.flush());
}
