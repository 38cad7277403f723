// CAF 0.17.6's openssl module never empties OpenSSL's per-thread error queue (libcaf_openssl,
// session.cpp: it drains it only inside CAF_LOG_INFO, which Debian's build compiles out). OpenSSL 3
// queues "unexpected eof while reading" whenever a peer closes without close_notify — every
// time a CAF node exits — and SSL_get_error reports any queued error as the result of the next
// call on the same thread, whatever its connection. So the next would-block SSL_read on the
// multiplexer thread "fails" and CAF closes a healthy connection. Seen: with TLS, every consumer
// that left cut the worker's connection to the dispatcher (evicted, registered again) and other
// consumers' connections. OpenSSL's rule is an empty queue before each I/O call; CAF is Debian's
// package, so openssl_error_queue.cpp interposes the four calls CAF makes (SSL_read, SSL_write,
// SSL_connect, SSL_accept) with versions that clear the queue, then call OpenSSL's.
#pragma once

namespace conveyor::actors {

// Whether this process's calls to SSL_read resolve to the clearing version (a TLS node logs a
// warning when they do not). Calling it also links the interposing definitions in.
bool openssl_error_queue_guarded();

} // namespace conveyor::actors
