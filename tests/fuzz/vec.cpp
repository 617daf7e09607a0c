// The .vec test-vector parser, then the parsed vectors run as a self-test
// against the algorithm their [name] denotes: malformed vectors (what a
// plugin may bring) must fail their test, never reach a transform unchecked.
#include "fuzz_util.hpp"

#include <blkcrypt/internal/testvec.hpp>

using namespace blkcrypt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto sets = parse_vector_file(text, "fuzz.vec");
    if (!sets) return 0;
    std::unique_ptr<Registry> reg;
    std::size_t tried = 0;
    for (const auto& s : *sets) {
        if (s.vectors.empty() || ++tried > 4) continue;
        for (const auto& v : s.vectors) {  // the accessors on every field
            for (const auto& [k, val] : v.fields) {
                (void)v.bytes(k);
                if (k == "repeat" || k == "authsize" || k == "novrfy" || k == "setkey_fails" ||
                    k == "sector_size" || k == "iv_large_sectors" || k == "key_count")
                    (void)v.number(k);
            }
        }
        if (!reg) reg = fuzz::make_registry();
        auto alg = reg->lookup_any(s.name);
        if (!alg) continue;
        (void)run_test_vectors(**alg, s.vectors, (size & 1) != 0);
    }
    return 0;
}
