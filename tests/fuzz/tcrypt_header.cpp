// The TrueCrypt/VeraCrypt header after decryption (tcrypt::from_decrypted):
// input = flags byte, chain byte, device size (u32, capped), then the 448
// decrypted header bytes. Flag bit 4 recomputes both CRC-32s first, so the
// fields behind them (offsets, sizes, versions) are reached. An accepted
// header must dump and give a target over a device of the given size, or a
// clean error. Flag bit 5 also runs the whole search (tcrypt::open) on the
// input as a device, limited to one fast KDF. Flag bit 6 reads the input as a
// disk's partition table (MBR, logical partitions, GPT) and maps an accepted
// system header onto the partition found.
#include "fuzz_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/tcrypt/tcrypt.hpp>

#include <cstdlib>
#include <cstring>
#include <vector>

using namespace blkcrypt;

namespace {
constexpr std::size_t kEnc = 448;
constexpr uint32_t kMaxDevice = 1 << 20;

struct ChainName {
    const char* cipher;
    const char* mode;
};
constexpr ChainName kChains[] = {
    {"aes", "xts-plain64"},         {"serpent-twofish", "xts-plain64"}, {"serpent-twofish-aes", "xts-plain64"},
    {"camellia", "xts-plain64"},    {"aes", "lrw-benbi"},              {"twofish-aes", "lrw-benbi"},
    {"aes", "cbc-tcw"},             {"kuznyechik", "xts-plain64"},     {"blowfish", "cbc-tcrypt"},
    {"cast5", "cbc-tcw"},           {"twofish-aes", "cbci-tcrypt"},    {"blowfish_le", "cbc-tcrypt"},
    {"blowfish_le-aes", "cbc-tcrypt"},
};

uint32_t crc32(const uint8_t* p, std::size_t n) {
    uint32_t c = ~0u;
    for (std::size_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int b = 0; b < 8; ++b) c = (c >> 1) ^ ((c & 1) ? 0xEDB88320u : 0);
    }
    return ~c;
}
void put_be32(uint8_t* p, uint32_t v) {
    for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    fuzz::Input in(data, size);
    const uint8_t flags = in.byte();
    const ChainName& chain = kChains[in.byte() % (sizeof kChains / sizeof kChains[0])];
    const uint64_t dev_size = in.u32() % (kMaxDevice + 1);
    std::vector<uint8_t> dec(kEnc);
    const std::string_view body = in.rest();
    std::memcpy(dec.data(), body.data(), std::min(body.size(), kEnc));
    if (flags & 16) {
        put_be32(dec.data() + 8, crc32(dec.data() + 192, 256));
        put_be32(dec.data() + 188, crc32(dec.data(), 188));
    }
    tcrypt::OpenOptions o;
    o.hidden = flags & 1;
    o.backup = flags & 2;
    o.system = flags & 4;
    o.veracrypt = flags & 8;
    auto reg = fuzz::make_registry();
    auto v = tcrypt::from_decrypted(dec, chain.cipher, chain.mode, dev_size, o);
    if (v) {
        (void)tcrypt::dump(*v, "fuzz");
        (void)tcrypt::dump_volume_key(*v, "fuzz");
        MemoryStore store(dev_size);
        auto t = tcrypt::dm_table(*v, store, "dev");
        if (t) {
            if (t->size() != 1 || !t->front().crypt) std::abort();
            (void)dm::CryptTarget::create(*reg, *t->front().crypt, std::make_shared<MemoryStore>(dev_size),
                                          t->front().length);
        }
    }
    if (flags & 64) {
        MemoryStore disk(size);
        std::memcpy(disk.data().data(), data, size);
        (void)tcrypt::has_partition_table(disk);
        auto p = tcrypt::find_partition(disk, 1 + (dev_size >> 8) % 12);
        if (p && v && o.system) {
            tcrypt::Volume sys = *v;
            if (tcrypt::map_system_partition(sys, *p, true) == Status::Ok) {
                (void)tcrypt::dump_volume_key(sys, "fuzz");
                MemoryStore whole(dev_size);
                (void)tcrypt::dm_table(sys, whole, "dev");
            }
        }
    }
    if (flags & 32) {
        MemoryStore dev(size);
        std::memcpy(dev.data().data(), data, size);
        o.veracrypt = false;
        o.hash = "sha512";  // TrueCrypt's 1000 iterations only
        static const uint8_t pass[] = {'f', 'u', 'z', 'z'};
        (void)tcrypt::open(*reg, dev, ConstBytes(pass, sizeof pass), o);
    }
    return 0;
}
