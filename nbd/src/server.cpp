// The NBD protocol for one connection: handshake, option haggling and the
// transmission phase (doc/proto.md). Socket-free: it reads and writes a
// Transport, so tests and the fuzz harness drive it from memory.
//
// Threads: the caller's thread reads requests and submits them; device
// completions hand finished replies to a writer thread that sends them (a
// client slow to read its replies then stalls only its own connection, never
// the device's workers). Every request holds a share of the connection's
// budget (a count and its buffer's bytes) until its reply is sent.
#include <blkcrypt/nbd/protocol.hpp>
#include <blkcrypt/nbd/server.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace blkcrypt::nbd {

// Locks over block ranges [begin, end), shared by the connections of an
// export: a write holds the blocks it writes, so a read-modify-write of a
// partial block never races another write of that block.
class RangeLocks {
public:
    void lock(uint64_t begin, uint64_t end) {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] {
            return std::none_of(held_.begin(), held_.end(),
                                [&](const auto& r) { return r.first < end && begin < r.second; });
        });
        held_.emplace_back(begin, end);
    }
    void unlock(uint64_t begin, uint64_t end) {
        {
            std::lock_guard lk(mu_);
            auto it = std::find(held_.begin(), held_.end(), std::pair{begin, end});
            if (it != held_.end()) held_.erase(it);
        }
        cv_.notify_all();
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<std::pair<uint64_t, uint64_t>> held_;
};

Export::Export(std::string name, std::shared_ptr<dm::BlockDevice> dev, Limits limits)
    : name_(std::move(name)), dev_(std::move(dev)), limits_(limits), locks_(std::make_unique<RangeLocks>()) {
    // A request must fit the budget once aligned to blocks, or it would wait forever.
    limits_.max_request = std::max<uint32_t>(limits_.max_request / dev_->block_size() * dev_->block_size(),
                                             dev_->block_size());
    limits_.max_inflight_bytes = std::max<std::size_t>(limits_.max_inflight_bytes,
                                                       limits_.max_request + 2 * std::size_t{dev_->block_size()});
    limits_.max_inflight = std::max(1u, limits_.max_inflight);
}

Export::~Export() = default;

uint16_t Export::transmission_flags() const {
    // Multi-conn is true: writes go straight to the shared store (no
    // per-connection cache), so a flush on any connection covers them all.
    uint16_t f = proto::kHasFlags | proto::kSendCache | proto::kCanMultiConn;
    if (dev_->read_only())
        f |= proto::kReadOnly;
    else
        f |= proto::kSendFlush | proto::kSendFua | proto::kSendWriteZeroes;
    if (!dev_->read_only() && dev_->can_discard()) f |= proto::kSendTrim;
    return f;
}

namespace {

constexpr uint32_t kMaxOptionLength = 64 * 1024;  // names are at most 4096 bytes
constexpr std::size_t kScratch = 64 * 1024;        // dropping payloads, zero writes
constexpr unsigned kMaxExtents = 1024;             // per BLOCK_STATUS reply (8 KiB)
constexpr std::string_view kAllocation = "base:allocation";

void put16(std::vector<uint8_t>& v, uint16_t x) {
    v.push_back(static_cast<uint8_t>(x >> 8));
    v.push_back(static_cast<uint8_t>(x));
}
void put32(std::vector<uint8_t>& v, uint32_t x) {
    put16(v, static_cast<uint16_t>(x >> 16));
    put16(v, static_cast<uint16_t>(x));
}
void put64(std::vector<uint8_t>& v, uint64_t x) {
    put32(v, static_cast<uint32_t>(x >> 32));
    put32(v, static_cast<uint32_t>(x));
}
uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t get32(const uint8_t* p) { return uint32_t{get16(p)} << 16 | get16(p + 2); }
uint64_t get64(const uint8_t* p) { return uint64_t{get32(p)} << 32 | get32(p + 4); }

uint32_t nbd_error(Status s) {
    switch (s) {
    case Status::Ok: return 0;
    case Status::Invalid: return proto::kEinval;
    case Status::NoMem: return proto::kEnomem;
    case Status::Unsupported: return proto::kEperm;
    default: return proto::kEio;  // IoError, Corrupt, BadMsg...
    }
}

// One request from submission to its reply.
struct Pending {
    uint64_t cookie = 0;
    uint16_t type = 0;
    uint32_t error = 0;
    std::size_t budget = 0;           // bytes of the budget it holds
    std::unique_ptr<uint8_t[]> buf;   // its aligned buffer (reads, writes)
    uint64_t offset = 0;              // the client's offset (read replies)
    std::size_t skip = 0, len = 0;    // the client's bytes within buf
    uint64_t lock_begin = 0, lock_end = 0;  // blocks locked (writes)
    bool fua = false;
    std::vector<uint8_t> extents;     // a BLOCK_STATUS reply's payload
};

// The reply to request `cookie` of `type` on the client's [offset, +len).
Pending* new_pending(uint64_t cookie, uint16_t type, uint64_t offset, uint32_t len) {
    auto* p = new Pending;
    p->cookie = cookie;
    p->type = type;
    p->offset = offset;
    p->len = len;
    return p;
}

class Connection {
public:
    Connection(Export& e, Transport& t, const ConnectionOptions& o)
        : exp_(e), dev_(e.device()), t_(t), lim_(e.limits()), opts_(o), tls_(o.tls) {}

    ConnectionStats run() {
        if (!handshake()) return stats_;
        stats_.transmission = true;
        if (opts_.on_transmission) opts_.on_transmission();
        writer_ = std::thread([this] { write_loop(); });
        transmission();
        {  // every request in flight is replied to before the writer stops
            std::unique_lock lk(mu_);
            idle_.wait(lk, [&] { return count_ == 0; });
            stop_writer_ = true;
        }
        wake_writer_.notify_all();
        writer_.join();
        stats_.errors = errors_;
        return stats_;
    }

private:
    // ---- handshake -----------------------------------------------------
    bool fail(std::string why) {
        stats_.end = std::move(why);
        return false;
    }
    bool send(const std::vector<uint8_t>& v) { return t_.write(v); }

    bool option_reply(uint32_t opt, uint32_t type, ConstBytes data = {}) {
        std::vector<uint8_t> v;
        put64(v, proto::kOptReplyMagic);
        put32(v, opt);
        put32(v, type);
        put32(v, static_cast<uint32_t>(data.size()));
        v.insert(v.end(), data.begin(), data.end());
        return send(v);
    }
    bool option_error(uint32_t opt, uint32_t type, std::string_view msg) {
        return option_reply(opt, type, ConstBytes(reinterpret_cast<const uint8_t*>(msg.data()), msg.size()));
    }

    // Returns true when the transmission phase begins.
    bool handshake() {
        std::vector<uint8_t> hello;
        put64(hello, proto::kNbdMagic);
        put64(hello, proto::kOptMagic);
        put16(hello, proto::kFlagFixedNewstyle | proto::kFlagNoZeroes);
        if (!send(hello)) return fail("end of stream");
        uint8_t cf[4];
        if (!t_.read(cf)) return fail("end of stream");
        const uint32_t client_flags = get32(cf);
        if (client_flags & ~(proto::kClientFixedNewstyle | proto::kClientNoZeroes))
            return fail("protocol error: unknown client flags");
        const bool no_zeroes = client_flags & proto::kClientNoZeroes;
        for (;;) {
            uint8_t h[16];
            if (!t_.read(h)) return fail("end of stream");
            if (get64(h) != proto::kOptMagic) return fail("protocol error: bad option magic");
            const uint32_t opt = get32(h + 8), len = get32(h + 12);
            if (len > kMaxOptionLength) return fail("protocol error: option of " + std::to_string(len) + " bytes");
            std::vector<uint8_t> data(len);
            if (len && !t_.read(data)) return fail("end of stream");
            // Before the upgrade, a server that requires TLS discusses nothing else.
            if (tls_ == TlsMode::Require && !stats_.tls && opt != proto::kOptStartTls && opt != proto::kOptAbort) {
                if (opt == proto::kOptExportName) return fail("protocol error: EXPORT_NAME before TLS");
                if (!option_error(opt, proto::kRepErrTlsReqd, "TLS is required")) return fail("end of stream");
                continue;
            }
            switch (opt) {
            case proto::kOptExportName: {
                const std::string name(data.begin(), data.end());
                if (!exp_.matches(name)) return fail("unknown export '" + name + "'");
                std::vector<uint8_t> v;
                put64(v, dev_.size());
                put16(v, exp_.transmission_flags());
                if (!no_zeroes) v.resize(v.size() + 124, 0);
                if (!send(v)) return fail("end of stream");
                stats_.export_name = name;
                return true;
            }
            case proto::kOptAbort:
                (void)option_reply(opt, proto::kRepAck);
                return fail("abort");
            case proto::kOptList: {
                if (len) {
                    if (!option_error(opt, proto::kRepErrInvalid, "LIST takes no data")) return fail("end of stream");
                    break;
                }
                std::vector<uint8_t> v;
                put32(v, static_cast<uint32_t>(exp_.name().size()));
                v.insert(v.end(), exp_.name().begin(), exp_.name().end());
                if (!option_reply(opt, proto::kRepServer, v) || !option_reply(opt, proto::kRepAck))
                    return fail("end of stream");
                break;
            }
            case proto::kOptInfo:
            case proto::kOptGo: {
                const int r = info(opt, data);
                if (r < 0) return fail("end of stream");
                if (r > 0 && opt == proto::kOptGo) return true;
                break;
            }
            case proto::kOptStructuredReply:
                if (len) {
                    if (!option_error(opt, proto::kRepErrInvalid, "STRUCTURED_REPLY takes no data"))
                        return fail("end of stream");
                    break;
                }
                structured_ = stats_.structured = true;
                if (!option_reply(opt, proto::kRepAck)) return fail("end of stream");
                break;
            case proto::kOptListMetaContext:
            case proto::kOptSetMetaContext:
                if (!meta_context(opt, data)) return fail("end of stream");
                break;
            case proto::kOptStartTls:
                if (tls_ == TlsMode::Off) {
                    if (!option_error(opt, proto::kRepErrUnsup, "TLS is not enabled")) return fail("end of stream");
                } else if (stats_.tls || len) {
                    if (!option_error(opt, proto::kRepErrInvalid, stats_.tls ? "TLS is already on" : "STARTTLS takes no data"))
                        return fail("end of stream");
                } else {
                    if (!option_reply(opt, proto::kRepAck)) return fail("end of stream");
                    if (!t_.start_tls()) return fail("TLS handshake failed");
                    // What was agreed in the clear could have been forged: forgotten.
                    stats_.tls = true;
                    structured_ = stats_.structured = allocation_ = false;
                }
                break;
            default:
                if (!option_error(opt, proto::kRepErrUnsup, "unsupported option")) return fail("end of stream");
                break;
            }
        }
    }

    // NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT: an export name
    // and queries; base:allocation is the one context. False: stream broken.
    bool meta_context(uint32_t opt, const std::vector<uint8_t>& d) {
        auto invalid = [&](const char* msg) { return option_error(opt, proto::kRepErrInvalid, msg); };
        if (opt == proto::kOptSetMetaContext && !structured_)
            return invalid("SET_META_CONTEXT needs structured replies first");
        std::size_t p = 0;
        auto string = [&](std::string& out) {
            if (d.size() - p < 4) return false;
            const uint32_t n = get32(d.data() + p);
            p += 4;
            if (n > d.size() - p) return false;
            out.assign(d.begin() + long(p), d.begin() + long(p + n));
            p += n;
            return true;
        };
        std::string name;
        if (!string(name) || d.size() - p < 4) return invalid("request too short");
        const uint32_t queries = get32(d.data() + p);
        p += 4;
        bool match = opt == proto::kOptListMetaContext && queries == 0;  // LIST with none: all
        for (uint32_t i = 0; i < queries; ++i) {
            std::string q;
            if (!string(q)) return invalid("query longer than the request");
            // LIST also takes a namespace alone ("base:"): every context in it.
            if (q == kAllocation || (opt == proto::kOptListMetaContext && q == "base:")) match = true;
        }
        if (p != d.size()) return invalid("bad length");
        if (!exp_.matches(name)) return option_error(opt, proto::kRepErrUnknown, "no such export");
        if (opt == proto::kOptSetMetaContext) allocation_ = match;  // each SET replaces the last
        if (match) {
            std::vector<uint8_t> v;
            put32(v, proto::kAllocationContextId);
            v.insert(v.end(), kAllocation.begin(), kAllocation.end());
            if (!option_reply(opt, proto::kRepMetaContext, v)) return false;
        }
        return option_reply(opt, proto::kRepAck);
    }

    // NBD_OPT_INFO / NBD_OPT_GO: -1 stream broken, 0 refused, 1 acknowledged.
    int info(uint32_t opt, const std::vector<uint8_t>& d) {
        auto invalid = [&](const char* msg) { return option_error(opt, proto::kRepErrInvalid, msg) ? 0 : -1; };
        if (d.size() < 6) return invalid("request too short");
        const uint32_t name_len = get32(d.data());
        if (name_len > d.size() - 6) return invalid("name longer than the request");
        const uint16_t n = get16(d.data() + 4 + name_len);
        if (d.size() != 6 + std::size_t{name_len} + 2 * std::size_t{n}) return invalid("bad length");
        const std::string name(d.begin() + 4, d.begin() + 4 + name_len);
        if (!exp_.matches(name))
            return option_error(opt, proto::kRepErrUnknown, "no such export") ? 0 : -1;
        bool want_name = false;
        for (uint16_t i = 0; i < n; ++i)
            if (get16(d.data() + 6 + name_len + 2 * i) == proto::kInfoName) want_name = true;
        std::vector<uint8_t> v;
        put16(v, proto::kInfoExport);
        put64(v, dev_.size());
        put16(v, exp_.transmission_flags());
        if (!option_reply(opt, proto::kRepInfo, v)) return -1;
        // Sent whether asked or not: the sector size is the smallest I/O the
        // device does without a read-modify-write.
        const uint32_t bs = dev_.block_size();
        v.clear();
        put16(v, proto::kInfoBlockSize);
        put32(v, bs);
        put32(v, std::max<uint32_t>(bs, 4096));
        put32(v, lim_.max_request);
        if (!option_reply(opt, proto::kRepInfo, v)) return -1;
        if (want_name) {
            v.clear();
            put16(v, proto::kInfoName);
            v.insert(v.end(), exp_.name().begin(), exp_.name().end());
            if (!option_reply(opt, proto::kRepInfo, v)) return -1;
        }
        if (!option_reply(opt, proto::kRepAck)) return -1;
        stats_.export_name = name;
        return 1;
    }

    // ---- transmission --------------------------------------------------
    void acquire(std::size_t bytes) {
        std::unique_lock lk(mu_);
        room_.wait(lk, [&] { return count_ < lim_.max_inflight && bytes_ + bytes <= lim_.max_inflight_bytes; });
        ++count_;
        bytes_ += bytes;
    }
    // Queues p's reply for the writer thread (from any thread).
    // Notifies under the lock: once it is released the writer may send this
    // last reply and the connection may end, destroying the condition variable.
    void finish(Pending* p) {
        std::lock_guard lk(mu_);
        replies_.push_back(p);
        wake_writer_.notify_one();
    }
    void reply_now(uint64_t cookie, uint16_t type, uint64_t offset, uint32_t len, uint32_t error) {
        acquire(0);
        auto* p = new_pending(cookie, type, offset, len);
        p->error = error;
        finish(p);
    }

    void write_loop() {
        std::unique_lock lk(mu_);
        for (;;) {
            wake_writer_.wait(lk, [&] { return stop_writer_ || !replies_.empty(); });
            if (replies_.empty()) return;
            std::unique_ptr<Pending> p(replies_.front());
            replies_.pop_front();
            lk.unlock();
            if (p->error) {
                ++errors_;
                if (opts_.on_error) opts_.on_error({p->type, p->offset, static_cast<uint32_t>(p->len), p->error});
            }
            if (!broken_ && !send_reply(*p)) {  // later replies are dropped
                broken_ = true;
                t_.abort();
            }
            const std::size_t b = p->budget;
            p.reset();
            lk.lock();
            --count_;
            bytes_ -= b;
            room_.notify_all();
            if (count_ == 0) idle_.notify_all();
        }
    }

    bool send_reply(const Pending& p) {
        std::vector<uint8_t> h;
        const bool data = p.type == proto::kCmdRead && !p.error;
        const bool status = p.type == proto::kCmdBlockStatus && !p.error;
        const ConstBytes payload = data ? ConstBytes(p.buf.get() + p.skip, p.len)
                                   : status ? ConstBytes(p.extents) : ConstBytes{};
        if (!structured_) {
            put32(h, proto::kSimpleReplyMagic);
            put32(h, p.error);
            put64(h, p.cookie);
            return t_.write2(h, payload);
        }
        put32(h, proto::kStructuredReplyMagic);
        put16(h, proto::kReplyFlagDone);
        if (p.error) {
            put16(h, proto::kReplyTypeError);
            put64(h, p.cookie);
            put32(h, 6);
            put32(h, p.error);
            put16(h, 0);  // no message
        } else if (data) {
            put16(h, proto::kReplyTypeOffsetData);
            put64(h, p.cookie);
            put32(h, static_cast<uint32_t>(8 + p.len));
            put64(h, p.offset);
        } else if (status) {
            put16(h, proto::kReplyTypeBlockStatus);
            put64(h, p.cookie);
            put32(h, static_cast<uint32_t>(p.extents.size()));
        } else {
            put16(h, proto::kReplyTypeNone);
            put64(h, p.cookie);
            put32(h, 0);
        }
        return t_.write2(h, payload);
    }

    // Reads and drops a payload the request will not use.
    bool drop(uint64_t len) {
        if (scratch_.empty()) scratch_.resize(kScratch);
        while (len) {
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(len, scratch_.size()));
            if (!t_.read(Bytes(scratch_.data(), n))) return false;
            len -= n;
        }
        return true;
    }

    bool in_range(uint64_t offset, uint64_t len) const {
        return offset <= dev_.size() && len <= dev_.size() - offset;
    }

    void transmission() {
        for (;;) {
            uint8_t h[28];
            if (broken_) {
                stats_.end = "a reply could not be sent";
                return;
            }
            if (!t_.read(h)) {
                stats_.end = broken_ ? "a reply could not be sent" : "end of stream";
                return;
            }
            if (get32(h) != proto::kRequestMagic) {
                stats_.end = "protocol error: bad request magic";
                return;
            }
            const uint16_t flags = get16(h + 4), type = get16(h + 6);
            const uint64_t cookie = get64(h + 8), offset = get64(h + 16);
            const uint32_t len = get32(h + 24);
            switch (type) {
            case proto::kCmdDisc:
                stats_.end = "disconnect";
                return;
            case proto::kCmdRead:
                ++stats_.reads;
                if (flags || !len || len > lim_.max_request || !in_range(offset, len))
                    reply_now(cookie, type, offset, len, proto::kEinval);
                else
                    read(cookie, offset, len);
                break;
            case proto::kCmdWrite: {
                ++stats_.writes;
                uint32_t err = 0;
                if (dev_.read_only()) err = proto::kEperm;
                else if ((flags & ~proto::kCmdFlagFua) || !len || len > lim_.max_request) err = proto::kEinval;
                else if (!in_range(offset, len)) err = proto::kEnospc;
                if (err) {
                    if (!drop(len)) {
                        stats_.end = "end of stream";
                        return;
                    }
                    reply_now(cookie, type, offset, len, err);
                } else if (!write(cookie, offset, len, flags & proto::kCmdFlagFua)) {
                    stats_.end = "end of stream";
                    return;
                }
                break;
            }
            case proto::kCmdFlush:
                ++stats_.flushes;
                reply_now(cookie, type, offset, len, flags ? proto::kEinval : nbd_error(dev_.flush()));
                break;
            case proto::kCmdWriteZeroes: {
                ++stats_.other;
                uint32_t err = 0;
                if (dev_.read_only()) err = proto::kEperm;
                else if ((flags & ~(proto::kCmdFlagFua | proto::kCmdFlagNoHole)) || !len) err = proto::kEinval;
                else if (!in_range(offset, len)) err = proto::kEnospc;
                else err = nbd_error(write_zeroes(offset, len, flags & proto::kCmdFlagFua));
                reply_now(cookie, type, offset, len, err);
                break;
            }
            case proto::kCmdCache:  // advisory: the page cache has it or will
                ++stats_.other;
                reply_now(cookie, type, offset, len, flags || !len || !in_range(offset, len) ? proto::kEinval : 0);
                break;
            case proto::kCmdTrim: {
                ++stats_.other;
                uint32_t err = 0;
                if (dev_.read_only()) err = proto::kEperm;
                else if (!dev_.can_discard() || (flags & ~proto::kCmdFlagFua) || !len) err = proto::kEinval;
                else if (!in_range(offset, len)) err = proto::kEnospc;
                else err = nbd_error(trim(offset, len, flags & proto::kCmdFlagFua));
                reply_now(cookie, type, offset, len, err);
                break;
            }
            case proto::kCmdBlockStatus:
                ++stats_.other;
                if (!allocation_ || (flags & ~proto::kCmdFlagReqOne) || !len || !in_range(offset, len))
                    reply_now(cookie, type, offset, len, proto::kEinval);
                else
                    block_status(cookie, offset, len, flags & proto::kCmdFlagReqOne);
                break;
            default:  // unknown: no payload
                ++stats_.other;
                reply_now(cookie, type, offset, len, proto::kEinval);
                break;
            }
        }
    }

    // A read or write: its budget held and a buffer over the whole blocks
    // that [offset, offset+len) touches, the client's bytes at p->skip.
    Pending* start_request(uint64_t cookie, uint16_t type, uint64_t offset, uint32_t len) {
        const uint32_t bs = dev_.block_size();
        const uint64_t a = offset / bs * bs, e = (offset + len + bs - 1) / bs * bs;
        const auto alen = static_cast<std::size_t>(e - a);
        acquire(alen);
        auto* p = new_pending(cookie, type, offset, len);
        p->budget = alen;
        p->buf.reset(new uint8_t[alen]);
        p->skip = static_cast<std::size_t>(offset - a);
        return p;
    }

    void read(uint64_t cookie, uint64_t offset, uint32_t len) {
        Pending* p = start_request(cookie, proto::kCmdRead, offset, len);
        stats_.bytes_read += len;
        // After submit, p belongs to the completion (it may already have run).
        const Status s = dev_.submit_read(offset - p->skip, Bytes(p->buf.get(), p->budget), [this, p](Status st) {
            p->error = nbd_error(st);
            finish(p);
        });
        if (s != Status::InProgress) {
            p->error = nbd_error(s == Status::Ok ? Status::IoError : s);
            finish(p);
        }
    }

    // Synchronous (the device's allocation query is a few lseeks); the
    // reply's descriptors count in the budget like a read's data.
    void block_status(uint64_t cookie, uint64_t offset, uint32_t len, bool one) {
        const unsigned max = one ? 1 : kMaxExtents;
        const std::size_t bytes = 4 + 8 * std::size_t{max};
        acquire(bytes);
        auto* p = new_pending(cookie, proto::kCmdBlockStatus, offset, len);
        p->budget = bytes;
        std::vector<dm::BlockDevice::Extent> ext = dev_.extents(offset, len, max);
        if (ext.empty() || ext.size() > max) ext = {{len, false, false}};
        put32(p->extents, proto::kAllocationContextId);
        for (const auto& e : ext) {
            if (e.length == 0 || e.length > len) break;  // a device's bad answer: stop there
            put32(p->extents, static_cast<uint32_t>(e.length));
            put32(p->extents, (e.hole ? proto::kStateHole : 0) | (e.zero ? proto::kStateZero : 0));
            len -= static_cast<uint32_t>(e.length);
        }
        if (p->extents.size() == 4) {  // nothing usable: all data
            put32(p->extents, len);
            put32(p->extents, 0);
        }
        finish(p);
    }

    // Fills the bytes of buf's first and last blocks outside [skip, skip+len)
    // from the device (the blocks are locked).
    Status merge_edges(uint64_t a, Bytes buf, std::size_t skip, std::size_t len) {
        const uint32_t bs = dev_.block_size();
        if (rmw_.size() < bs) rmw_.resize(bs);
        const std::size_t end = skip + len;
        uint64_t have = UINT64_MAX;  // the block in rmw_
        if (skip % bs) {
            if (Status s = dm::read_sync(dev_, a, Bytes(rmw_.data(), bs)); s != Status::Ok) return s;
            have = a;
            std::memcpy(buf.data(), rmw_.data(), skip);
        }
        if (end % bs) {
            const uint64_t last = a + buf.size() - bs;
            if (have != last)
                if (Status s = dm::read_sync(dev_, last, Bytes(rmw_.data(), bs)); s != Status::Ok) return s;
            const std::size_t in_block = end % bs;
            std::memcpy(buf.data() + end, rmw_.data() + in_block, bs - in_block);
        }
        return Status::Ok;
    }

    bool write(uint64_t cookie, uint64_t offset, uint32_t len, bool fua) {
        const uint32_t bs = dev_.block_size();
        Pending* p = start_request(cookie, proto::kCmdWrite, offset, len);
        const uint64_t a = offset - p->skip;
        const std::size_t alen = p->budget;
        p->fua = fua;
        if (!t_.read(Bytes(p->buf.get() + p->skip, len))) {
            p->error = proto::kEio;  // nobody reads it; releases the budget
            finish(p);
            return false;
        }
        stats_.bytes_written += len;
        p->lock_begin = a / bs;
        p->lock_end = (a + alen) / bs;
        exp_.locks().lock(p->lock_begin, p->lock_end);
        if (Status s = merge_edges(a, Bytes(p->buf.get(), alen), p->skip, len); s != Status::Ok) {
            exp_.locks().unlock(p->lock_begin, p->lock_end);
            p->error = nbd_error(s);
            finish(p);
            return true;
        }
        const Status s = dev_.submit_write(a, ConstBytes(p->buf.get(), alen), [this, p](Status st) {
            if (st == Status::Ok && p->fua) st = dev_.flush();
            exp_.locks().unlock(p->lock_begin, p->lock_end);
            p->error = nbd_error(st);
            finish(p);
        });
        if (s != Status::InProgress) {
            exp_.locks().unlock(p->lock_begin, p->lock_end);
            p->error = nbd_error(s == Status::Ok ? Status::IoError : s);
            finish(p);
        }
        return true;
    }

    // The whole blocks inside the range (a trim is advice: partial blocks are
    // kept), locked against writes. A store that cannot discard keeps its data.
    Status trim(uint64_t offset, uint64_t len, bool fua) {
        const uint32_t bs = dev_.block_size();
        const uint64_t a = (offset + bs - 1) / bs * bs, e = (offset + len) / bs * bs;
        if (e > a) {
            exp_.locks().lock(a / bs, e / bs);
            Status s = dev_.discard(a, e - a);
            exp_.locks().unlock(a / bs, e / bs);
            if (s != Status::Ok && s != Status::Unsupported) return s;
        }
        return fua ? dev_.flush() : Status::Ok;
    }

    // Synchronous, piece by piece through one scratch buffer: zeroes need no
    // payload, so there is nothing to keep in flight.
    Status write_zeroes(uint64_t offset, uint64_t len, bool fua) {
        const uint32_t bs = dev_.block_size();
        if (zero_.empty()) zero_.resize(kScratch);
        while (len) {
            const uint64_t a = offset / bs * bs;
            const std::size_t skip = static_cast<std::size_t>(offset - a);
            const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(len, zero_.size() - skip));
            const std::size_t alen = (skip + n + bs - 1) / bs * bs;
            std::memset(zero_.data(), 0, alen);
            exp_.locks().lock(a / bs, (a + alen) / bs);
            Status s = merge_edges(a, Bytes(zero_.data(), alen), skip, n);
            if (s == Status::Ok) s = dm::write_sync(dev_, a, ConstBytes(zero_.data(), alen));
            exp_.locks().unlock(a / bs, (a + alen) / bs);
            if (s != Status::Ok) return s;
            offset += n;
            len -= n;
        }
        return fua ? dev_.flush() : Status::Ok;
    }

    Export& exp_;
    dm::BlockDevice& dev_;
    Transport& t_;
    const Limits& lim_;
    const ConnectionOptions& opts_;
    const TlsMode tls_;
    ConnectionStats stats_;
    bool structured_ = false;
    bool allocation_ = false;  // base:allocation selected (SET_META_CONTEXT)
    std::vector<uint8_t> scratch_, rmw_, zero_;  // reader thread only

    std::mutex mu_;
    std::condition_variable room_, idle_, wake_writer_;
    std::deque<Pending*> replies_;
    unsigned count_ = 0;
    std::size_t bytes_ = 0;
    bool stop_writer_ = false;
    std::atomic<bool> broken_{false};  // a reply failed: the stream is lost
    uint64_t errors_ = 0;   // writer thread only
    std::thread writer_;
};

}  // namespace

ConnectionStats serve_connection(Export& exp, Transport& t, const ConnectionOptions& opts) {
    Connection c(exp, t, opts);
    return c.run();
}

std::string command_name(uint16_t c) {
    switch (c) {
    case proto::kCmdRead: return "read";
    case proto::kCmdWrite: return "write";
    case proto::kCmdDisc: return "disc";
    case proto::kCmdFlush: return "flush";
    case proto::kCmdTrim: return "trim";
    case proto::kCmdCache: return "cache";
    case proto::kCmdWriteZeroes: return "write_zeroes";
    case proto::kCmdBlockStatus: return "block_status";
    default: return "command " + std::to_string(c);
    }
}

std::string error_name(uint32_t e) {
    switch (e) {
    case proto::kEperm: return "EPERM";
    case proto::kEio: return "EIO";
    case proto::kEnomem: return "ENOMEM";
    case proto::kEinval: return "EINVAL";
    case proto::kEnospc: return "ENOSPC";
    case proto::kEnotsup: return "ENOTSUP";
    case proto::kEshutdown: return "ESHUTDOWN";
    default: return "error " + std::to_string(e);
    }
}

}  // namespace blkcrypt::nbd
