// fs-verity parameters: hash name, block size and salt from the input, the
// rest is the file. Parameter checks, tree size, then the digest computed in
// one pass and in uneven pieces (the two must agree).
#include "fuzz_util.hpp"

#include <blkcrypt/verity/fsverity.hpp>

#include <cstdlib>
#include <cstring>

using namespace blkcrypt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    fuzz::Input in(data, size);
    static const char* const kHashes[] = {"sha256", "sha512", "sha1", "", "SHA256", "sha256-generic",
                                          "crc32c", "poly1305", "hmac(sha256)", "sha3-256"};
    verity::FsverityParams p;
    const uint8_t h = in.byte();
    p.hash = h < 10 ? kHashes[h] : std::string(in.take(h % 40));
    p.block_size = in.u32();
    const std::string_view salt = in.take(in.byte() % 48);
    p.salt.assign(salt.begin(), salt.end());
    p.threads = 1 + in.byte() % 2;
    const std::string_view file = in.rest();
    if (!verity::fsverity_check_params(p)) return 0;
    (void)verity::fsverity_tree_size(p, file.size());
    (void)verity::fsverity_tree_size(p, ~uint64_t{0});  // no overflow on a huge file
    if (p.block_size > (1u << 20)) return 0;  // memory: a few blocks per level
    auto reg = fuzz::make_registry();
    std::size_t pos = 0;
    auto read = [&](Bytes buf) -> Result<void> {
        if (buf.size() > file.size() - pos) return make_error(Status::IoError, "short");
        if (!buf.empty()) std::memcpy(buf.data(), file.data() + pos, buf.size());
        pos += buf.size();
        return {};
    };
    auto one = verity::fsverity_compute(*reg, p, file.size(), read);
    auto b = verity::FsverityBuilder::create(*reg, p, file.size());
    if (!b) {
        if (one) std::abort();
        return 0;
    }
    if (!b->update(ConstBytes{})) return 0;  // an empty (null) span first
    ConstBytes rest(reinterpret_cast<const uint8_t*>(file.data()), file.size());
    for (std::size_t k = 0; !rest.empty(); ++k) {
        const std::size_t n = std::min(rest.size(), (k * 37) % 5000);
        if (!b->update(rest.first(n))) return 0;
        rest = rest.subspan(n);
    }
    auto two = b->finish();
    if (one.ok() != two.ok() || (one && one->digest != two->digest)) std::abort();
    return 0;
}
