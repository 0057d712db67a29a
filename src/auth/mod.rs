//! Who is on a connection: the listener it came in on and the client's address, read by the
//! request handlers (Metadata answers with that listener's addresses). Built by the
//! connection once per accepted socket; calls nothing.

use std::rc::Rc;
use std::sync::Arc;

use crate::config::Listener;

/// One client connection as the handlers see it.
#[derive(Debug)]
pub struct Session {
    /// The client's address ("ip:port"), as the connection saw it.
    pub peer: Rc<str>,
    /// The listener the connection came in on.
    pub listener: Arc<Listener>,
}

impl Session {
    /// A session for a connection from `peer` on `listener`.
    pub fn new(peer: &str, listener: Arc<Listener>) -> Self {
        Session {
            peer: Rc::from(peer),
            listener,
        }
    }
}
