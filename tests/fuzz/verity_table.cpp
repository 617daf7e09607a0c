// dm-verity table lines (the whole line and the arguments-only form), then a
// tree formatted for the table's geometry over small data and the target
// built from the table: reads checked against the fuzzed root hash and
// against the real one.
#include "fuzz_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/verity/table.hpp>
#include <blkcrypt/verity/target.hpp>
#include <blkcrypt/verity/tree.hpp>

#include <cstdlib>
#include <vector>

using namespace blkcrypt;

namespace {

constexpr uint64_t kMaxBytes = 64 * 1024;  // data and hash device, each

// The table as given over devices far smaller than it may claim: create must
// refuse what does not fit (no size computation may wrap), reads stay inside.
void claimed(Registry& reg, const verity::VerityTable& t) {
    auto data = std::make_shared<dm::MemoryStore>(16 * 1024);
    auto hash = std::make_shared<dm::MemoryStore>(16 * 1024);
    auto tg = verity::VerityTarget::create(reg, t, data, hash);
    if (!tg) return;
    const verity::VerityParams& p = t.params;
    // It accepted the table: the devices must really hold the data and the tree.
    auto g = verity::plan_tree(reg, p);
    if (!g || p.data_blocks > data->size() / p.data_block_size) std::abort();
    std::vector<uint8_t> buf((*tg)->block_size());
    (void)(*tg)->read(0, buf);
}

void run(verity::VerityTable t) {
    {
        auto reg = fuzz::make_registry();
        claimed(*reg, t);
    }
    verity::VerityParams& p = t.params;
    if (p.data_blocks > kMaxBytes / p.data_block_size) return;
    if (t.hash_start_block > kMaxBytes / p.hash_block_size) return;
    p.superblock = false;
    p.hash_offset = t.hash_start_block * p.hash_block_size;
    auto reg = fuzz::make_registry();
    auto g = verity::plan_tree(*reg, p);
    if (!g) return;
    const uint64_t hash_bytes = g->hash_device_size(p);
    if (hash_bytes > kMaxBytes) return;
    auto data = std::make_shared<dm::MemoryStore>(p.data_blocks * p.data_block_size);
    for (std::size_t i = 0; i < data->data().size(); ++i) data->data()[i] = static_cast<uint8_t>(i * 7 / 512);
    auto hash = std::make_shared<dm::MemoryStore>(hash_bytes);
    verity::TreeOptions topts;
    topts.threads = 1;
    auto f = verity::format_tree(*reg, p, *data, *hash, topts);
    if (!f) return;
    for (bool real_root : {false, true}) {
        if (real_root) t.root_hash = f->root_hash;
        auto tg = verity::VerityTarget::create(*reg, t, data, hash);
        if (!tg) continue;
        std::vector<uint8_t> buf((*tg)->block_size());
        (void)(*tg)->read(0, buf);
        // The last whole block (a table's length need not be whole blocks, as in the kernel).
        const uint64_t whole = (*tg)->size() / buf.size() * buf.size();
        if (whole >= buf.size()) {
            Status s = (*tg)->read(whole - buf.size(), buf);
            // The tree was built over this data: with its own root every block verifies.
            if (real_root && t.on_corruption == verity::CorruptionMode::Error && s != Status::Ok) std::abort();
        }
        (void)(*tg)->read((*tg)->size(), buf);  // one past the end
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (auto line = verity::parse_verity_line(text)) {
        auto again = verity::parse_verity_line(line->line());
        if (!again || again->line() != line->line()) std::abort();
        run(*line);
    }
    if (auto args = verity::parse_verity_args(text)) {
        auto again = verity::parse_verity_args(args->args());
        if (!again || again->args() != args->args()) std::abort();
        run(*args);
    }
    return 0;
}
