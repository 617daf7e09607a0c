// Sending to a client that may stop reading: the socket's SO_SNDTIMEO is the
// longest wait without progress. A blocking send would restart that wait for
// each part of a reply it sends, so a stalled reader of a large reply held
// its connection (and a stop) for several timeouts; here the wait is for the
// socket to take anything at all, and a partial send returns at once.
#pragma once

#include <cerrno>

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

namespace blkcrypt::nbd::detail {

// sendmsg without SIGPIPE; -1 with ETIMEDOUT when nothing could be sent for
// the socket's send timeout.
inline ssize_t send_waiting(int fd, const msghdr& m) {
    timeval tv{};
    socklen_t tl = sizeof tv;
    int wait_ms = -1;
    if (::getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &tl) == 0 && (tv.tv_sec || tv.tv_usec))
        wait_ms = static_cast<int>(tv.tv_sec * 1000 + tv.tv_usec / 1000);
    for (;;) {
        const ssize_t n = ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return n;
        if (errno == EINTR) continue;
        pollfd p{fd, POLLOUT, 0};
        const int r = ::poll(&p, 1, wait_ms);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
    }
}

}  // namespace blkcrypt::nbd::detail
