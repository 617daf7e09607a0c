// dm-crypt table lines: the argument and whole-line parsers, the cipher spec
// mapping, then the target built from the table over a small MemoryStore and
// a few bios (write, read back, a request split across segments).
#include "fuzz_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/bio.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/table.hpp>

#include <cstdlib>
#include <vector>

using namespace blkcrypt;

namespace {

constexpr std::size_t kDevice = 16 * 1024;

void run(const dm::CryptTable& t) {
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
