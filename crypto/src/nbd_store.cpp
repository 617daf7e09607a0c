// The NBD client store: an image that another NBD server (nbdkit, qemu-nbd,
// rbd-nbd, blkcrypt serve) exports, reached through libnbd. A transfer is
// cut into requests of at most kPiece bytes that go out together, spread
// over the connections the store holds (several when the server advertises
// multi-conn), so a large read costs about what nbdcopy pays.
//
// libnbd is opened with dlopen on the first URI rather than linked: its
// dependencies (GnuTLS, libxml2, ...) would otherwise load at every start of
// every command, most of which never see a URI (the same reason serve's
// GnuTLS is opened late, nbd/src/tls.cpp).
#include <blkcrypt/backing_store.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#ifdef BLKCRYPT_WITH_NBD_CLIENT
#include <libnbd.h>

#include <condition_variable>
#include <mutex>
#include <vector>

#include <dlfcn.h>
#include <poll.h>
#endif

namespace blkcrypt {

bool is_nbd_uri(std::string_view path) noexcept {
    // libnbd's schemes: nbd, nbds, nbd+unix, nbds+unix, nbd+vsock, nbds+vsock.
    for (std::string_view s : {"nbd://", "nbds://", "nbd+unix://", "nbds+unix://", "nbd+vsock://", "nbds+vsock://"})
        if (path.substr(0, s.size()) == s) return true;
    return false;
}

#ifndef BLKCRYPT_WITH_NBD_CLIENT

Result<std::shared_ptr<BackingStore>> open_store(const std::string& path, bool writable) {
    if (is_nbd_uri(path))
        return make_error(Status::Unsupported, path + ": this blkcrypt was built without the NBD client "
                                                     "(libnbd; configure with -DBLKCRYPT_WITH_NBD_CLIENT=ON)");
    return open_file_store(path, writable);
}

#else

namespace {

#define BLKCRYPT_NBD_FUNCTIONS(X)                                                                           \
    X(nbd_create) X(nbd_close) X(nbd_get_error) X(nbd_get_errno) X(nbd_set_handle_name)                    \
    X(nbd_set_uri_allow_local_file) X(nbd_connect_uri) X(nbd_get_size) X(nbd_is_read_only)                 \
    X(nbd_can_multi_conn) X(nbd_can_flush) X(nbd_can_zero) X(nbd_get_block_size) X(nbd_aio_pread)         \
    X(nbd_aio_pwrite) X(nbd_aio_flush) X(nbd_aio_zero) X(nbd_aio_get_fd) X(nbd_aio_get_direction)          \
    X(nbd_aio_notify_read) X(nbd_aio_notify_write) X(nbd_aio_command_completed) X(nbd_aio_is_dead)        \
    X(nbd_shutdown)

struct Api {
#define BLKCRYPT_NBD_SLOT(name) decltype(&::name) name = nullptr;
    BLKCRYPT_NBD_FUNCTIONS(BLKCRYPT_NBD_SLOT)
#undef BLKCRYPT_NBD_SLOT
    std::string error;  // why it could not be loaded
};

const Api& api() {
    static const Api a = [] {
        Api r;
        void* h = ::dlopen(BLKCRYPT_LIBNBD_SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (!h) {
            const char* e = ::dlerror();
            r.error = std::string("cannot load libnbd (" BLKCRYPT_LIBNBD_SONAME "; Debian: libnbd0): ") +
                      (e ? e : "unknown error");
            return r;
        }
        bool ok = true;
#define BLKCRYPT_NBD_LOAD(name)                                                               \
    r.name = reinterpret_cast<decltype(&::name)>(::dlsym(h, #name));                          \
    if (!r.name && ok) {                                                                      \
        ok = false;                                                                           \
        r.error = "libnbd (" BLKCRYPT_LIBNBD_SONAME ") lacks " #name " (libnbd 1.4 or later is needed)"; \
    }
        BLKCRYPT_NBD_FUNCTIONS(BLKCRYPT_NBD_LOAD)
#undef BLKCRYPT_NBD_LOAD
        return r;
    }();
    return a;
}

// One request: its cookie once issued.
struct Piece {
    uint64_t offset;
    uint64_t length;
    uint8_t* buf;  // read into / written from; null for flush and zero
    int64_t cookie = 0;
};

enum class Op { Read, Write, Flush, Zero };

constexpr uint64_t kPiece = 256 * 1024;  // bytes per request (nbdcopy's default)
constexpr std::size_t kDepth = 16;       // requests in flight per connection
constexpr unsigned kMaxConns = 4;        // connections with multi-conn (nbdcopy's default)

class NbdStore final : public BackingStore {
public:
    NbdStore(std::string uri, bool writable) : uri_(std::move(uri)), writable_(writable) {}
    ~NbdStore() override {
        const Api& a = api();
        for (nbd_handle* h : conns_) {
            if (!a.nbd_aio_is_dead(h)) a.nbd_shutdown(h, 0);
            a.nbd_close(h);
        }
    }
    NbdStore(const NbdStore&) = delete;
    NbdStore& operator=(const NbdStore&) = delete;

    // Connects the first connection, reads what the server offers, then adds
    // the others when it allows multi-conn.
    Status connect(std::string& why) {
        const Api& a = api();
        nbd_handle* h = open_one(why);
        if (!h) return Status::IoError;
        conns_.push_back(h);
        const int64_t size = a.nbd_get_size(h);
        if (size < 0) return fail(why, "cannot get the size of");
        size_ = static_cast<uint64_t>(size);
        const int ro = a.nbd_is_read_only(h);
        if (ro < 0) return fail(why, "cannot query");
        if (writable_ && ro) {
            why = uri_ + ": the NBD export is read-only";
            return Status::Invalid;
        }
        can_flush_ = a.nbd_can_flush(h) == 1;
        can_zero_ = a.nbd_can_zero(h) == 1;
        const int64_t minimum = a.nbd_get_block_size(h, LIBNBD_SIZE_MINIMUM);
        const int64_t maximum = a.nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);
        if (minimum > 1) min_block_ = static_cast<uint64_t>(minimum);
        piece_ = kPiece;
        if (maximum > 0 && static_cast<uint64_t>(maximum) < piece_) piece_ = static_cast<uint64_t>(maximum);
        piece_ = std::max(min_block_, piece_ / min_block_ * min_block_);
        if (a.nbd_can_multi_conn(h) == 1) {
            // More connections only speed things up: one that fails is left out.
            for (unsigned i = 1; i < kMaxConns; ++i) {
                std::string ignored;
                nbd_handle* more = open_one(ignored);
                if (!more) break;
                conns_.push_back(more);
            }
        }
        for (std::size_t i = 0; i < conns_.size(); ++i) free_.push_back(i);
        return Status::Ok;
    }

    Status read(uint64_t offset, Bytes out) override {
        if (!fits(offset, out.size())) return Status::IoError;
        if (out.empty()) return Status::Ok;
        const uint64_t a0 = offset / min_block_ * min_block_;
        const uint64_t a1 = round_up(offset + out.size());
        if (a0 == offset && a1 == offset + out.size()) return transfer(Op::Read, offset, out.size(), out.data());
        // The server takes only whole blocks of min_block_: read them around.
        std::vector<uint8_t> tmp(a1 - a0);
        if (Status s = transfer(Op::Read, a0, tmp.size(), tmp.data()); s != Status::Ok) return s;
        std::memcpy(out.data(), tmp.data() + (offset - a0), out.size());
        return Status::Ok;
    }

    Status write(uint64_t offset, ConstBytes in) override {
        if (!writable_ || !fits(offset, in.size())) return Status::IoError;
        if (in.empty()) return Status::Ok;
        const uint64_t a0 = offset / min_block_ * min_block_;
        const uint64_t a1 = round_up(offset + in.size());
        if (a0 == offset && a1 == offset + in.size())
            return transfer(Op::Write, offset, in.size(), const_cast<uint8_t*>(in.data()));
        // Part of a block: read, patch and write it back, one at a time so
        // two such writes to one block do not lose either.
        std::lock_guard lk(rmw_);
        std::vector<uint8_t> tmp(a1 - a0);
        if (Status s = transfer(Op::Read, a0, tmp.size(), tmp.data()); s != Status::Ok) return s;
        std::memcpy(tmp.data() + (offset - a0), in.data(), in.size());
        return transfer(Op::Write, a0, tmp.size(), tmp.data());
    }

    uint64_t size() const override { return size_; }

    Status flush() override {
        if (!writable_ || !can_flush_) return Status::Ok;
        return transfer(Op::Flush, 0, 0, nullptr);
    }

    // NBD_CMD_WRITE_ZEROES without NO_HOLE (the server may punch): the range reads as zeros after
    // it, as the file store's hole does (a plain NBD trim does not promise that).
    Status discard(uint64_t offset, uint64_t len) override {
        if (!writable_ || !can_zero_) return Status::Unsupported;
        if (!fits(offset, len)) return Status::IoError;
        if (offset % min_block_ || len % min_block_) return Status::Unsupported;
        if (len == 0) return Status::Ok;
        return transfer(Op::Zero, offset, len, nullptr);
    }

    std::string name() const override { return uri_; }

private:
    bool fits(uint64_t offset, uint64_t len) const noexcept { return offset <= size_ && len <= size_ - offset; }
    uint64_t round_up(uint64_t x) const noexcept { return (x + min_block_ - 1) / min_block_ * min_block_; }

    nbd_handle* open_one(std::string& why) {
        const Api& a = api();
        nbd_handle* h = a.nbd_create();
        if (!h) {
            why = std::string("libnbd: ") + (a.nbd_get_error() ? a.nbd_get_error() : "cannot create a handle");
            return nullptr;
        }
        a.nbd_set_handle_name(h, "blkcrypt");
        // The URI is the user's own argument; let it name a TLS PSK file.
        a.nbd_set_uri_allow_local_file(h, true);
        if (a.nbd_connect_uri(h, uri_.c_str()) != 0) {
            why = uri_ + ": " + (a.nbd_get_error() ? a.nbd_get_error() : "cannot connect");
            a.nbd_close(h);
            return nullptr;
        }
        return h;
    }

    Status fail(std::string& why, const char* what) {
        const char* e = api().nbd_get_error();
        why = std::string(what) + " " + uri_ + ": " + (e ? e : "unknown error");
        return Status::IoError;
    }

    // Takes up to `want` free connections (at least one, waiting for it);
    // all: every connection (a flush), waiting until they are all free.
    std::vector<std::size_t> acquire(std::size_t want, bool all) {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return all ? free_.size() == conns_.size() : !free_.empty(); });
        std::vector<std::size_t> got;
        while (!free_.empty() && got.size() < want) {
            got.push_back(free_.back());
            free_.pop_back();
        }
        return got;
    }
    void release(const std::vector<std::size_t>& got) {
        {
            std::lock_guard lk(mu_);
            free_.insert(free_.end(), got.begin(), got.end());
        }
        cv_.notify_all();
    }

    int64_t issue(nbd_handle* h, Op op, Piece& p) {
        const Api& a = api();
        nbd_completion_callback none{};  // retired by nbd_aio_command_completed
        switch (op) {
        case Op::Read: return a.nbd_aio_pread(h, p.buf, p.length, p.offset, none, 0);
        case Op::Write: return a.nbd_aio_pwrite(h, p.buf, p.length, p.offset, none, 0);
        case Op::Flush: return a.nbd_aio_flush(h, none, 0);
        case Op::Zero: return a.nbd_aio_zero(h, p.length, p.offset, none, 0);
        }
        return -1;
    }

    // Issues [offset, offset+len) as pieces over some connections and waits
    // for all of them: the caller's buffer is not given back while the
    // server may still write into it, even after a failure.
    Status transfer(Op op, uint64_t offset, uint64_t len, uint8_t* buf) {
        const Api& a = api();
        std::vector<Piece> pieces;
        if (op == Op::Flush) {
            pieces.resize(conns_.size(), Piece{0, 0, nullptr});  // each connection flushes
        } else {
            for (uint64_t at = 0; at < len;) {
                // Zeroing carries no payload: larger pieces (within 32-bit NBD lengths).
                const uint64_t step = op == Op::Zero ? std::max<uint64_t>(piece_, uint64_t{1} << 30) / min_block_ * min_block_
                                                     : piece_;
                const uint64_t n = std::min(step, len - at);
                pieces.push_back(Piece{offset + at, n, buf ? buf + at : nullptr});
                at += n;
            }
        }
        const std::vector<std::size_t> got =
            op == Op::Flush ? acquire(conns_.size(), true) : acquire(pieces.size(), false);
        // Piece i goes to connection got[i % k], in order.
        const std::size_t k = got.size();
        std::vector<std::size_t> next(k), done(k);  // per connection: the next piece to issue / to retire
        for (std::size_t c = 0; c < k; ++c) next[c] = done[c] = c;
        bool failed = false;
        std::vector<pollfd> fds;
        std::vector<std::size_t> polled;
        for (;;) {
            fds.clear();
            polled.clear();
            for (std::size_t c = 0; c < k; ++c) {
                nbd_handle* h = conns_[got[c]];
                // Retire what has completed, in order (a later one may finish
                // first; it is retired when its turn comes).
                while (done[c] < next[c]) {
                    const int r = a.nbd_aio_command_completed(h, pieces[done[c]].cookie);
                    if (r == 0) break;
                    if (r < 0) failed = true;
                    done[c] += k;
                }
                while (!failed && next[c] < pieces.size() && (next[c] - done[c]) / k < kDepth) {
                    const int64_t cookie = issue(h, op, pieces[next[c]]);
                    if (cookie < 0) {
                        failed = true;
                        break;
                    }
                    pieces[next[c]].cookie = cookie;
                    next[c] += k;
                }
                if (done[c] == next[c]) continue;
                const int fd = a.nbd_aio_get_fd(h);
                if (fd < 0 || a.nbd_aio_is_dead(h)) {
                    // The connection is gone: libnbd has failed what was in
                    // flight; retire it.
                    while (done[c] < next[c]) {
                        a.nbd_aio_command_completed(h, pieces[done[c]].cookie);
                        done[c] += k;
                    }
                    failed = true;
                    continue;
                }
                const unsigned dir = a.nbd_aio_get_direction(h);
                short ev = 0;
                if (dir & LIBNBD_AIO_DIRECTION_READ) ev |= POLLIN;
                if (dir & LIBNBD_AIO_DIRECTION_WRITE) ev |= POLLOUT;
                fds.push_back(pollfd{fd, ev, 0});
                polled.push_back(c);
            }
            if (fds.empty()) break;
            if (::poll(fds.data(), fds.size(), -1) < 0) {
                if (errno == EINTR) continue;
                failed = true;  // cannot happen with valid fds; do not spin
                for (std::size_t c : polled) {
                    nbd_handle* h = conns_[got[c]];
                    a.nbd_shutdown(h, LIBNBD_SHUTDOWN_ABANDON_PENDING);
                }
                continue;
            }
            for (std::size_t i = 0; i < fds.size(); ++i) {
                nbd_handle* h = conns_[got[polled[i]]];
                if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) a.nbd_aio_notify_read(h);
                else if (fds[i].revents & POLLOUT) a.nbd_aio_notify_write(h);
            }
        }
        release(got);
        return failed ? Status::IoError : Status::Ok;
    }

    std::string uri_;
    bool writable_;
    uint64_t size_ = 0;
    uint64_t min_block_ = 1;
    uint64_t piece_ = kPiece;
    bool can_flush_ = false;
    bool can_zero_ = false;
    std::vector<nbd_handle*> conns_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<std::size_t> free_;
    std::mutex rmw_;
};

}  // namespace

Result<std::shared_ptr<BackingStore>> open_store(const std::string& path, bool writable) {
    if (!is_nbd_uri(path)) return open_file_store(path, writable);
    const Api& a = api();
    if (!a.error.empty()) return make_error(Status::Unsupported, path + ": " + a.error);
    auto s = std::make_shared<NbdStore>(path, writable);
    std::string why;
    if (Status st = s->connect(why); st != Status::Ok) return make_error(st, why);
    return std::shared_ptr<BackingStore>(std::move(s));
}

#endif

}  // namespace blkcrypt
