// FileVault 2 metadata: the input's first 512 bytes are a physical volume
// header, then 8192-byte decrypted metadata blocks (the plist and base64
// parsers behind them), so the fuzzer reaches the block parsers without
// forging XTS ciphertext and CRCs; a volume that parses whole is dumped and
// tried with a passphrase (at most 1000 PBKDF2 iterations). The input is also
// read as a device (zeros after its end, 2 GiB): read_metadata follows the
// offsets it finds and must stay below 1 GiB and refuse or accept cleanly.
#include "fuzz_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/fvault2/fvault2.hpp>

#include <algorithm>
#include <cstring>

using namespace blkcrypt;

namespace {

// The input at offset 0 and zeros up to size(); reads beyond 1 GiB abort
// (cryptsetup's limit, which read_metadata promises to keep).
class PaddedStore final : public BackingStore {
public:
    explicit PaddedStore(ConstBytes in) : in_(in) {}
    Status read(uint64_t offset, Bytes out) override {
        if (offset > size() || out.size() > size() - offset) return Status::Invalid;
        if (offset + out.size() > fvault2::kMaxOffset + fvault2::kBlockSize) std::abort();
        std::memset(out.data(), 0, out.size());
        if (offset < in_.size()) {
            const std::size_t n = std::min<uint64_t>(out.size(), in_.size() - offset);
            std::memcpy(out.data(), in_.data() + offset, n);
        }
        return Status::Ok;
    }
    Status write(uint64_t, ConstBytes) override { return Status::Unsupported; }
    uint64_t size() const override { return 2ull << 30; }

private:
    ConstBytes in_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const ConstBytes in(data, size);
    auto reg = fuzz::make_registry();
    (void)fvault2::parse_volume_header(*reg, in.first(std::min<std::size_t>(size, fvault2::kVolumeHeaderSize)));
    fvault2::Metadata md;
    md.block_size = 4096;
    bool parsed = size > fvault2::kVolumeHeaderSize;
    for (std::size_t at = fvault2::kVolumeHeaderSize; at < size && parsed; at += fvault2::kBlockSize) {
        std::vector<uint8_t> block(fvault2::kBlockSize, 0);
        std::memcpy(block.data(), data + at, std::min(size - at, fvault2::kBlockSize));
        (void)fvault2::checksum_ok(*reg, block);
        parsed = fvault2::parse_metadata_block(block, md).ok();
    }
    if (parsed && md.found == fvault2::kFoundAll) {
        (void)fvault2::dump(md, "fuzz");
        if (md.pbkdf2_iterations <= 1000) {
            static const uint8_t pass[] = {'h', 'e', 's', 'l', 'o', '1', '2', '3'};
            auto vk = fvault2::unlock(*reg, md, ConstBytes(pass, sizeof pass));
            if (vk && vk->size() != fvault2::kVolumeKeySize) std::abort();
        }
    }
    PaddedStore dev(in);
    auto full = fvault2::read_metadata(*reg, dev);
    if (full && full->found != fvault2::kFoundAll) std::abort();
    return 0;
}
