// Server: the sockets around serve_connection. A Unix socket (mode 0600) and/or
// TCP on loopback, one thread per connection, and a stop that lets every
// request in flight finish and be replied to before the device is flushed.
#include <blkcrypt/nbd/server.hpp>
#include <blkcrypt/nbd/tls.hpp>

#include "send_wait.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

namespace blkcrypt::nbd {
namespace {

class FdTransport final : public Transport {
public:
    FdTransport(int fd, TlsCredentials* creds) : fd_(fd), creds_(creds) {}
    bool start_tls() override {
        if (!creds_ || tls_) return false;
        auto t = creds_->handshake(fd_);
        if (!t) {
            tls_error_ = t.error().message;
            return false;
        }
        tls_ = std::move(*t);
        return true;
    }
    const std::string& tls_error() const noexcept { return tls_error_; }
    void abort() override { ::shutdown(fd_, SHUT_RDWR); }
    bool read(Bytes out) override {
        if (tls_) return tls_->read(out);
        std::size_t done = 0;
        while (done < out.size()) {
            const ssize_t n = ::recv(fd_, out.data() + done, out.size() - done, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            done += static_cast<std::size_t>(n);
        }
        return true;
    }
    bool write(ConstBytes in) override { return write2(in, {}); }
    bool write2(ConstBytes a, ConstBytes b) override {
        if (tls_) return tls_->write2(a, b);
        iovec iov[2] = {{const_cast<uint8_t*>(a.data()), a.size()}, {const_cast<uint8_t*>(b.data()), b.size()}};
        int first = 0;
        while (first < 2) {
            if (iov[first].iov_len == 0) {
                ++first;
                continue;
            }
            msghdr m{};
            m.msg_iov = iov + first;
            m.msg_iovlen = static_cast<std::size_t>(2 - first);
            const ssize_t n = detail::send_waiting(fd_, m);
            if (n <= 0) return false;
            for (auto left = static_cast<std::size_t>(n); left && first < 2;) {
                const std::size_t k = std::min(left, iov[first].iov_len);
                iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + k;
                iov[first].iov_len -= k;
                left -= k;
                if (iov[first].iov_len == 0) ++first;
            }
        }
        return true;
    }

private:
    int fd_;
    TlsCredentials* creds_;
    std::unique_ptr<Transport> tls_;  // after STARTTLS
    std::string tls_error_;
};

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

bool is_loopback(const sockaddr* sa) {
    if (sa->sa_family == AF_INET)
        return (ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const auto* a = &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a);
    }
    return false;
}

std::string peer_name(const sockaddr_storage& ss) {
    char host[INET6_ADDRSTRLEN] = "?";
    if (ss.ss_family == AF_INET) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
        ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
    }
    if (ss.ss_family == AF_INET6) {
        const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
        ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        return "[" + std::string(host) + "]:" + std::to_string(ntohs(a->sin6_port));
    }
    return "unix";
}

// After a kill, the socket file of the old server stays behind and bind()
// fails. It is removed only when it is a socket and nothing listens on it
// (connect() is refused); anything else at the path is left alone.
bool remove_stale_socket(const sockaddr_un& sa) {
    struct stat st {};
    if (::lstat(sa.sun_path, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
    const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0) return false;
    const bool refused = ::connect(probe, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 &&
                         errno == ECONNREFUSED;
    ::close(probe);
    return refused && ::unlink(sa.sun_path) == 0;
}

}  // namespace

struct Server::Impl {
    using Clock = std::chrono::steady_clock;
    struct Conn {
        int fd = -1;
        std::thread thread;
        bool done = false;
        // Until the transmission phase: closed at the deadline (guarded by mu).
        bool handshaking = true;
        bool timed_out = false;
        Clock::time_point handshake_deadline;
    };
    std::shared_ptr<Export> exp;
    ServerOptions opts;
    std::vector<int> listeners;
    int wake[2] = {-1, -1};
    std::mutex mu;
    std::list<Conn> conns;
    uint64_t next_id = 1;

    ~Impl() {
        for (int fd : listeners) ::close(fd);
        for (int fd : wake)
            if (fd >= 0) ::close(fd);
        if (!opts.socket_path.empty() && !listeners.empty()) ::unlink(opts.socket_path.c_str());
    }

    // Shuts down the connections whose handshake outlived its deadline; their
    // threads then see the end of the stream (plain or TLS alike). Returns
    // the milliseconds until the next deadline, -1 when none is pending.
    int expire_handshakes() {
        const auto now = Clock::now();
        std::lock_guard lk(mu);
        Clock::duration next = Clock::duration::max();
        for (auto& c : conns) {
            if (!c.handshaking || c.timed_out || c.done) continue;
            if (now >= c.handshake_deadline) {
                c.timed_out = true;
                ::shutdown(c.fd, SHUT_RDWR);
            } else {
                next = std::min(next, c.handshake_deadline - now);
            }
        }
        if (next == Clock::duration::max()) return -1;
        return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(next).count());
    }

    // Joins the finished connections (all of them when `all`).
    void reap(bool all) {
        std::unique_lock lk(mu);
        for (auto it = conns.begin(); it != conns.end();) {
            if (!all && !it->done) {
                ++it;
                continue;
            }
            std::thread t = std::move(it->thread);
            lk.unlock();
            if (t.joinable()) t.join();
            lk.lock();
            ::close(it->fd);
            it = conns.erase(it);
        }
    }

    void accept_one(int lfd) {
        sockaddr_storage ss{};
        socklen_t sl = sizeof ss;
        const int fd = ::accept4(lfd, reinterpret_cast<sockaddr*>(&ss), &sl, SOCK_CLOEXEC);
        if (fd < 0) return;  // the client gave up already, or EMFILE: try again later
        // A client that stops reading its replies fails after this long instead
        // of holding its requests' memory, and a stop, forever.
        const timeval send_timeout{static_cast<time_t>(opts.send_timeout_ms / 1000),
                                   static_cast<suseconds_t>(opts.send_timeout_ms % 1000 * 1000)};
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
        if (ss.ss_family != AF_UNIX) {
            const int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        reap(false);
        std::lock_guard lk(mu);
        if (conns.size() >= opts.max_connections) {
            ::close(fd);
            if (opts.log) opts.log("connection refused: " + std::to_string(opts.max_connections) + " already");
            return;
        }
        Conn& c = conns.emplace_back();
        c.fd = fd;
        c.handshaking = opts.handshake_timeout_ms > 0;
        c.handshake_deadline = Clock::now() + std::chrono::milliseconds(opts.handshake_timeout_ms);
        const uint64_t id = next_id++;
        const std::string peer = peer_name(ss);
        c.thread = std::thread([this, &c, fd, id, peer] {
            ConnectionStats st;
            std::string tls_error;
            {
                FdTransport t(fd, opts.tls.get());
                ConnectionOptions co{.tls = opts.tls_mode, .on_error = {}};
                if (opts.on_request_error)
                    co.on_error = [this, id](const RequestError& e) { opts.on_request_error(id, e); };
                co.on_transmission = [this, &c] {
                    std::lock_guard lk2(mu);
                    c.handshaking = false;
                };
                if (opts.on_open) opts.on_open(id, peer);
                st = serve_connection(*exp, t, co);
                tls_error = t.tls_error();
            }  // a TLS session says goodbye before the shutdown
            {
                std::lock_guard lk2(mu);
                if (c.timed_out && !st.transmission) {
                    st.end = "no handshake within " + std::to_string(opts.handshake_timeout_ms) + " ms";
                    tls_error.clear();
                }
            }
            // The client waits for the close after NBD_CMD_DISC; the fd itself
            // is closed when the thread is joined, so stop() never sees a reused fd.
            ::shutdown(fd, SHUT_RDWR);
            if (opts.log) {
                std::string line = "connection " + std::to_string(id) + " (" + peer + ")";
                if (st.transmission)
                    line += ": export '" + st.export_name + "'" + (st.tls ? " tls" : "") +
                            (st.structured ? " structured" : "") + ", " +
                            std::to_string(st.reads) + " reads (" + std::to_string(st.bytes_read) + " bytes), " +
                            std::to_string(st.writes) + " writes (" + std::to_string(st.bytes_written) +
                            " bytes), " + std::to_string(st.flushes) + " flushes, " +
                            std::to_string(st.other) + " other, " + std::to_string(st.errors) + " errors";
                line += "; " + st.end + (tls_error.empty() ? "" : " (" + tls_error + ")");
                opts.log(line);
            }
            if (opts.on_close) opts.on_close(id, peer, st);
            std::lock_guard lk2(mu);
            c.done = true;
        });
    }
};

Result<std::unique_ptr<Server>> Server::listen(std::shared_ptr<Export> exp, ServerOptions opts) {
    if (!exp) return make_error(Status::Invalid, "no export");
    if (opts.socket_path.empty() && !opts.port) return make_error(Status::Invalid, "no socket path and no port");
    if ((opts.tls_mode != TlsMode::Off) != bool(opts.tls))
        return make_error(Status::Invalid, "TLS on needs credentials, and credentials need TLS on");
    std::unique_ptr<Server> srv(new Server);
    srv->impl_ = std::make_unique<Impl>();
    Impl& im = *srv->impl_;
    im.exp = std::move(exp);
    im.opts = std::move(opts);
    if (::pipe2(im.wake, O_CLOEXEC | O_NONBLOCK) != 0) return make_error(Status::IoError, errno_text("pipe"));

    if (!im.opts.socket_path.empty()) {
        const std::string& path = im.opts.socket_path;
        sockaddr_un sa{};
        sa.sun_family = AF_UNIX;
        if (path.size() >= sizeof sa.sun_path)
            return make_error(Status::Invalid, path + ": socket path longer than " +
                                                   std::to_string(sizeof sa.sun_path - 1) + " bytes");
        std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
        const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return make_error(Status::IoError, errno_text("socket"));
        // Created 0600 from the start: no window in which others may connect.
        const mode_t old = ::umask(0177);
        int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
        int err = errno;
        if (rc != 0 && err == EADDRINUSE && remove_stale_socket(sa)) {
            rc = ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
            err = errno;
        }
        ::umask(old);
        if (rc != 0) {
            ::close(fd);
            errno = err;
            struct stat st {};
            const char* hint = err != EADDRINUSE                                     ? ""
                               : ::lstat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode) ? " (the path is not a socket)"
                                                                                     : " (a server listens on it)";
            return make_error(Status::IoError, errno_text(path) + hint);
        }
        if (::listen(fd, 64) != 0) {
            ::close(fd);
            ::unlink(path.c_str());
            return make_error(Status::IoError, errno_text(path));
        }
        im.listeners.push_back(fd);
    }
    if (im.opts.port) {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
        addrinfo* res = nullptr;
        const std::string port = std::to_string(*im.opts.port);
        if (int rc = ::getaddrinfo(im.opts.bind.c_str(), port.c_str(), &hints, &res); rc != 0)
            return make_error(Status::Invalid, "--bind " + im.opts.bind + ": " + ::gai_strerror(rc));
        std::string error;
        for (addrinfo* ai = res; ai; ai = ai->ai_next) {
            // Off loopback, only TLS keeps the data (and the key it decrypts) private.
            if (!is_loopback(ai->ai_addr) && im.opts.tls_mode != TlsMode::Require) {
                error = "--bind " + im.opts.bind + ": not a loopback address: serving it needs --tls require";
                break;
            }
            const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
            if (fd < 0) continue;
            const int one = 1;
            ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (ai->ai_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
            if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
                error = errno_text("--bind " + im.opts.bind + " port " + port);
                ::close(fd);
                continue;
            }
            sockaddr_storage ss{};
            socklen_t sl = sizeof ss;
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &sl);
            srv->port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                                        : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
            im.listeners.push_back(fd);
            break;  // one address is enough (the first loopback address bound)
        }
        ::freeaddrinfo(res);
        if (!error.empty() || srv->port_ == 0)
            return make_error(Status::Invalid, error.empty() ? "--bind " + im.opts.bind + ": no address" : error);
    }
    return srv;
}

Server::~Server() {
    if (impl_) {
        stop();
        impl_->reap(true);
    }
}

void Server::stop() noexcept {
    const char c = 's';
    [[maybe_unused]] ssize_t n = ::write(impl_->wake[1], &c, 1);
}

Status Server::run() {
    Impl& im = *impl_;
    std::vector<pollfd> fds;
    for (int fd : im.listeners) fds.push_back({fd, POLLIN, 0});
    fds.push_back({im.wake[0], POLLIN, 0});
    for (;;) {
        for (auto& p : fds) p.revents = 0;
        const int wait_ms = im.expire_handshakes();
        const int ready = ::poll(fds.data(), fds.size(), wait_ms);
        if (ready < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (ready == 0) continue;  // a handshake deadline
        if (fds.back().revents) break;
        for (std::size_t i = 0; i + 1 < fds.size(); ++i)
            if (fds[i].revents & POLLIN) im.accept_one(fds[i].fd);
    }
    // Stop reading requests; what was read is finished and replied to.
    {
        std::lock_guard lk(im.mu);
        for (auto& c : im.conns) ::shutdown(c.fd, SHUT_RD);
    }
    im.reap(true);
    im.exp->device().drain();
    return im.exp->device().flush();
}

}  // namespace blkcrypt::nbd
