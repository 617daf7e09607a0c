// The NBD server's protocol (handshake, options, transmission) fed arbitrary
// client bytes: serve_connection over a memory transport and a 64 KiB
// MemoryStore. The first byte picks the block size (512 or 4096),
// read-only and whether TLS is required (the memory transport cannot start
// it: STARTTLS then fails, every other option is refused); the rest is what
// the client sends. The server must reply or
// hang up, never crash, and leave nothing in flight.
#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/nbd/server.hpp>

#include <cstdlib>
#include <cstring>
#include <mutex>

using namespace blkcrypt;

namespace {

class Input final : public nbd::Transport {
public:
    Input(const uint8_t* d, std::size_t n) : d_(d), n_(n) {}
    bool read(Bytes out) override {
        if (out.size() > n_) return false;
        if (!out.empty()) std::memcpy(out.data(), d_, out.size());
        d_ += out.size();
        n_ -= out.size();
        return true;
    }
    bool write(ConstBytes in) override {
        std::lock_guard lk(mu_);
        written_ += in.size();
        return true;
    }

private:
    const uint8_t* d_;
    std::size_t n_;
    std::mutex mu_;
    std::size_t written_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    auto store = std::make_shared<MemoryStore>(64 * 1024);
    dm::StoreDeviceOptions o;
    o.block_size = data[0] & 1 ? 4096 : 512;
    o.read_only = data[0] & 2;
    o.threads = 1;
    auto dev = dm::make_store_device(store, o);
    if (!dev) std::abort();
    nbd::Limits lim;
    lim.max_request = 16 * 1024;  // small limits, so inputs reach them
    lim.max_inflight_bytes = 40 * 1024;
    lim.max_inflight = 4;
    nbd::Export exp("fuzz", *dev, lim);
    Input in(data + 1, size - 1);
    nbd::ConnectionOptions co;
    co.tls = data[0] & 4 ? nbd::TlsMode::Require : nbd::TlsMode::Off;
    (void)nbd::serve_connection(exp, in, co);
    return 0;
}
