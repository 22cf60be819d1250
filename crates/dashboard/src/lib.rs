//! The web dashboard for ad ops (issue 8): server-rendered pages served by the manager at `/`.
