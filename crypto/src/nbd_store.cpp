// The NBD client store: an image that another NBD server (nbdkit, qemu-nbd,
// rbd-nbd, blkcrypt serve) exports, reached through libnbd. A transfer is
// cut into requests of at most kPiece bytes that go out together, spread
// over the connections the store holds (several when the server advertises
// multi-conn), so a large read costs about what nbdcopy pays. Many
// transfers share the connections at once (NbdStore).
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

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
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
    X(nbd_aio_notify_read) X(nbd_aio_notify_write) X(nbd_aio_is_dead)                  \
    X(nbd_shutdown) X(nbd_set_request_structured_replies)

struct Api {
#define BLKCRYPT_NBD_SLOT(name) decltype(&::name) name = nullptr;
    BLKCRYPT_NBD_FUNCTIONS(BLKCRYPT_NBD_SLOT)
#undef BLKCRYPT_NBD_SLOT
    // Optional (libnbd 1.10): null when older, or not in the headers built against.
    int (*nbd_set_pread_initialize)(nbd_handle*, bool) = nullptr;
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
        r.nbd_set_pread_initialize =
            reinterpret_cast<int (*)(nbd_handle*, bool)>(::dlsym(h, "nbd_set_pread_initialize"));
        return r;
    }();
    return a;
}

enum class Op { Read, Write, Flush, Zero };

constexpr uint64_t kPiece = 256 * 1024;  // bytes per request (nbdcopy's default)
constexpr std::size_t kDepth = 16;       // requests in flight per connection
constexpr unsigned kMaxConns = 4;        // connections with multi-conn (nbdcopy's default)

// Every caller shares every connection: a transfer issues its pieces round
// the connections (each handle takes many commands at once) and waits until
// they are all done, while one thread of the store drives the sockets. The
// copy pump's workers each read a bio at a time; when a transfer held its
// connections alone, their reads queued behind each other and a remote image
// decrypted at half the speed of a local one.
class NbdStore final : public BackingStore {
public:
    NbdStore(std::string uri, bool writable) : uri_(std::move(uri)), writable_(writable) {}
    ~NbdStore() override {
        if (pump_.joinable()) {
            {
                std::lock_guard lk(mu_);
                stop_ = true;
            }
            wake();
            pump_.join();
        }
        if (wake_fd_ >= 0) ::close(wake_fd_);
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
        wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (wake_fd_ < 0) {
            why = uri_ + ": eventfd: " + std::strerror(errno);
            return Status::IoError;
        }
        pump_ = std::thread([this] { drive(); });
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

    // Whole blocks only: a partial block's widened read stays with read().
    bool start_read(uint64_t offset, Bytes out, const Completion& done) override {
        if (!fits(offset, out.size()) || out.empty() || offset % min_block_ || out.size() % min_block_) return false;
        start(Op::Read, offset, out.size(), out.data(), done);
        return true;
    }
    // Serve on a remote image: 1.7 s per GiB with 8 bios in flight, 1.0-1.2 s
    // with 32, at 2 ms a read (nbdkit's delay filter).
    std::size_t read_depth() const override { return 32; }

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

    // Every connection flushes: writes that have completed (the callers' have,
    // transfer waits for them) are then stable whichever connection took them.
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
    // One transfer's requests: how many libnbd still holds (and one hold of
    // the issuing call's own, so that requests completing while it still
    // issues do not finish the transfer), whether one failed, and whom to
    // tell when the last hold goes.
    struct Batch {
        NbdStore* store;
        Completion done;
        std::size_t held = 1;
        bool failed = false;
    };

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
        // libnbd zeroes every read buffer before the server fills it, in case
        // a caller uses it after an error or the server's structured reply
        // left part of it out: a pass over every byte read, a seventh of a
        // remote decrypt's time. Ours look at a buffer only after its read
        // succeeded, and with simple replies (we use no block status) a
        // successful read carries every byte asked for, so the pass is off.
        a.nbd_set_request_structured_replies(h, false);
        if (a.nbd_set_pread_initialize) a.nbd_set_pread_initialize(h, false);
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

    void wake() noexcept {
        const uint64_t one = 1;
        [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);  // EAGAIN: already pending
    }

    // libnbd calls these on the pump thread, or .free of a command it refused
    // in the issuing call. The completion runs once for each command issued
    // (also when the connection dies), .free once for every command whether
    // issued or refused (libnbd(3), "Completion callbacks"): the completion
    // records a failure, .free counts the command out.
    static int completed(void* user, int* error) {
        auto* b = static_cast<Batch*>(user);
        if (*error) {
            std::lock_guard lk(b->store->mu_);
            b->failed = true;
        }
        return 1;  // retired here
    }
    static void released(void* user) {
        auto* b = static_cast<Batch*>(user);
        NbdStore* s = b->store;
        {
            std::lock_guard lk(s->mu_);
            --s->in_flight_;
            if (s->room_waiters_) s->room_.notify_all();
        }
        s->drop(b);
    }
    // The last hold of a transfer tells its caller, outside the lock.
    void drop(Batch* b) {
        Status st;
        {
            std::lock_guard lk(mu_);
            if (--b->held) return;
            st = b->failed ? Status::IoError : Status::Ok;
        }
        Completion done = std::move(b->done);
        delete b;
        done(st);
    }

    int64_t issue(nbd_handle* h, Op op, uint8_t* buf, uint64_t length, uint64_t offset, Batch& b) {
        const Api& a = api();
        nbd_completion_callback cb{completed, &b, released};
        switch (op) {
        case Op::Read: return a.nbd_aio_pread(h, buf, length, offset, cb, 0);
        case Op::Write: return a.nbd_aio_pwrite(h, buf, length, offset, cb, 0);
        case Op::Flush: return a.nbd_aio_flush(h, cb, 0);
        case Op::Zero: return a.nbd_aio_zero(h, length, offset, cb, 0);
        }
        return -1;
    }

    // Issues [offset, offset+len) as pieces round the connections, at most
    // kDepth per connection in flight over all callers (waiting here for
    // room), and returns; done runs when all of them are over: the caller's
    // buffer is not given back while the server may still write into it,
    // even after a failure.
    void start(Op op, uint64_t offset, uint64_t len, uint8_t* buf, const Completion& done) {
        const Api& a = api();
        auto* b = new Batch{this, done};
        // Zeroing carries no payload: larger pieces (within 32-bit NBD lengths).
        const uint64_t step =
            op == Op::Zero ? std::max<uint64_t>(piece_, uint64_t{1} << 30) / min_block_ * min_block_ : piece_;
        const std::size_t n = conns_.size();
        const std::size_t pieces = op == Op::Flush ? n : static_cast<std::size_t>((len + step - 1) / step);
        const std::size_t first = next_conn_.fetch_add(pieces, std::memory_order_relaxed);
        for (std::size_t i = 0; i < pieces; ++i) {
            {
                std::unique_lock lk(mu_);
                if (in_flight_ >= kDepth * n && !b->failed) {
                    ++room_waiters_;
                    room_.wait(lk, [&] { return in_flight_ < kDepth * n || b->failed; });
                    --room_waiters_;
                }
                if (b->failed) break;
                ++in_flight_;
                ++b->held;
            }
            nbd_handle* h = conns_[op == Op::Flush ? i : (first + i) % n];
            const uint64_t at = uint64_t{i} * step;
            const uint64_t m = op == Op::Flush ? 0 : std::min(step, len - at);
            if (issue(h, op, buf ? buf + at : nullptr, m, offset + at, *b) < 0) {
                // Refused (a dead connection): libnbd has already called .free.
                std::lock_guard lk(mu_);
                b->failed = true;
                break;
            }
            // A request that did not go out at once waits for the socket to
            // take it: the pump must poll for writing.
            if (a.nbd_aio_get_direction(h) & LIBNBD_AIO_DIRECTION_WRITE) wake();
        }
        drop(b);
    }

    // start, waited for.
    Status transfer(Op op, uint64_t offset, uint64_t len, uint8_t* buf) {
        struct Wait {
            std::mutex mu;
            std::condition_variable cv;
            bool over = false;
            Status st = Status::Ok;
        } w;
        Wait* pw = &w;
        start(op, offset, len, buf, [pw](Status st) {
            // Notified under the lock: w is gone once the waiter sees over.
            std::lock_guard lk(pw->mu);
            pw->st = st;
            pw->over = true;
            pw->cv.notify_one();
        });
        std::unique_lock lk(w.mu);
        w.cv.wait(lk, [&] { return w.over; });
        return w.st;
    }

    // The pump thread: waits on every live connection's socket in the
    // direction libnbd wants, and on wake_fd_ (a new request that needs the
    // socket writable, or the end); libnbd runs the completions from here.
    void drive() {
        const Api& a = api();
        std::vector<pollfd> fds;
        std::vector<nbd_handle*> polled;
        for (;;) {
            {
                std::lock_guard lk(mu_);
                if (stop_) return;
            }
            fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
            polled.assign(1, nullptr);
            for (nbd_handle* h : conns_) {
                const int fd = a.nbd_aio_get_fd(h);
                if (fd < 0 || a.nbd_aio_is_dead(h)) continue;  // gone: libnbd failed what it held
                const unsigned dir = a.nbd_aio_get_direction(h);
                short ev = 0;
                if (dir & LIBNBD_AIO_DIRECTION_READ) ev |= POLLIN;
                if (dir & LIBNBD_AIO_DIRECTION_WRITE) ev |= POLLOUT;
                if (!ev) continue;
                fds.push_back(pollfd{fd, ev, 0});
                polled.push_back(h);
            }
            if (::poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR
            if (fds[0].revents & POLLIN) {
                uint64_t count;
                [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &count, sizeof count);
            }
            for (std::size_t i = 1; i < fds.size(); ++i) {
                if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) a.nbd_aio_notify_read(polled[i]);
                else if (fds[i].revents & POLLOUT) a.nbd_aio_notify_write(polled[i]);
            }
        }
    }

    std::string uri_;
    bool writable_;
    uint64_t size_ = 0;
    uint64_t min_block_ = 1;
    uint64_t piece_ = kPiece;
    bool can_flush_ = false;
    bool can_zero_ = false;
    std::vector<nbd_handle*> conns_;  // fixed once connected
    std::atomic<std::size_t> next_conn_{0};
    std::mutex mu_;                   // in_flight_, room_waiters_, every Batch, stop_
    std::condition_variable room_;    // in_flight_ went down
    std::size_t room_waiters_ = 0;
    std::size_t in_flight_ = 0;
    bool stop_ = false;
    int wake_fd_ = -1;
    std::thread pump_;
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
