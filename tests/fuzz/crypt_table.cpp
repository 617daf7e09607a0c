// dm-crypt table lines: the argument and whole-line parsers, the cipher spec
// mapping, then the target built from the table over a small MemoryStore and
// a few bios (write, read back, a request split across segments); a table
// with the integrity feature builds the AEAD engine over in-memory tags.
#include "fuzz_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/aead_target.hpp>
#include <blkcrypt/dm/bio.hpp>
#include <blkcrypt/dm/block_device.hpp>
#include <blkcrypt/integrity/tagged_device.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/table.hpp>

#include <cstdlib>
#include <cstring>
#include <vector>

using namespace blkcrypt;

namespace {

constexpr std::size_t kDevice = 16 * 1024;

// Data and tags in memory, for the integrity feature's engine.
class MemTagged final : public integrity::TaggedDevice {
public:
    MemTagged(uint32_t bs, uint32_t ts) : data_(kDevice), tags_(kDevice / bs * ts), bs_(bs), ts_(ts) {}
    uint64_t size() const override { return kDevice; }
    uint32_t block_size() const override { return bs_; }
    uint32_t tag_size() const override { return ts_; }
    bool read_only() const override { return false; }
    Result<void> read(uint64_t off, Bytes data, Bytes tags) override {
        if (!ok(off, data.size(), tags.size())) return make_error(Status::Invalid, "range");
        std::memcpy(data.data(), data_.data() + off, data.size());
        std::memcpy(tags.data(), tags_.data() + off / bs_ * ts_, tags.size());
        return {};
    }
    Result<void> write(uint64_t off, ConstBytes data, ConstBytes tags) override {
        if (!ok(off, data.size(), tags.size())) return make_error(Status::Invalid, "range");
        std::memcpy(data_.data() + off, data.data(), data.size());
        std::memcpy(tags_.data() + off / bs_ * ts_, tags.data(), tags.size());
        return {};
    }
    Result<void> flush() override { return {}; }
    std::string describe() const override { return "memory tags"; }

private:
    bool ok(uint64_t off, std::size_t n, std::size_t t) const {
        return off % bs_ == 0 && n % bs_ == 0 && off + n <= kDevice && t == n / bs_ * ts_;
    }
    std::vector<uint8_t> data_, tags_;
    uint32_t bs_, ts_;
};

void run_integrity(const dm::CryptTable& t) {
    auto reg = fuzz::make_registry();
    auto lower = std::make_shared<MemTagged>(static_cast<uint32_t>(t.sector_size), t.integrity_tag_size);
    dm::AeadCryptOptions opts;
    opts.threads = 1;
    opts.chunk = 4096;
    auto dev = dm::make_aead_crypt_device(*reg, t, lower, 0, opts);
    if (!dev) return;
    std::vector<uint8_t> buf(8192, 0x11);
    if (dm::write_sync(**dev, 0, ConstBytes(buf.data(), buf.size())) != Status::Ok) return;
    // What was written reads back; a sector never written fails its tag.
    if (dm::read_sync(**dev, 0, Bytes(buf.data(), buf.size())) != Status::Ok) std::abort();
    for (uint8_t c : buf)
        if (c != 0x11) std::abort();
    (void)dm::read_sync(**dev, kDevice - t.sector_size, Bytes(buf.data(), t.sector_size));
}

void run(const dm::CryptTable& t) {
    if (t.integrity_tag_size) return run_integrity(t);
    auto reg = fuzz::make_registry();
    auto store = std::make_shared<dm::MemoryStore>(kDevice);
    dm::CryptTargetOptions opts;
    opts.threads = 1;  // the worker pool is not what is being fuzzed here
    auto tg = dm::CryptTarget::create(*reg, t, store, 0, opts);
    if (!tg) return;
    std::vector<uint8_t> buf(8192, 0x11);
    dm::Bio w;
    w.dir = dm::BioDir::Write;
    w.sector = 8;
    w.vecs = {{buf.data(), 1000}, {buf.data() + 1000, 3096}, {buf.data() + 4096, 4096}};
    (void)(*tg)->submit_sync(w);
    dm::Bio r;
    r.dir = dm::BioDir::Read;
    r.sector = 8;
    r.vecs = {{buf.data(), buf.size()}};
    (void)(*tg)->submit_sync(r);
    dm::Bio tail;  // the last sector, and one past the end
    tail.dir = dm::BioDir::Read;
    tail.sector = kDevice / 512 - 1;
    tail.vecs = {{buf.data(), 1024}};
    (void)(*tg)->submit_sync(tail);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    (void)dm::parse_cipher_spec(text.substr(0, text.find(' ')));
    if (auto line = dm::parse_table_line(text)) {
        // What the parser accepted prints as a line that parses to the same.
        auto again = dm::parse_table_line(line->table_line(true));
        if (!again || again->table_line(true) != line->table_line(true)) std::abort();
    }
    auto t = dm::parse_crypt_args(text);
    if (!t) return 0;
    auto again = dm::parse_crypt_args(t->crypt_args(true));
    if (!again || again->crypt_args(true) != t->crypt_args(true)) std::abort();
    run(*t);
    return 0;
}
