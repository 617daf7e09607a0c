// dmsetup table files (serve --dm-table): the line parser with the crypt and
// verity argument parsers under it, then a table it accepts built over small
// memory stores (every path names one) and read at its first and last block
// and across its first boundary.
#include "fuzz_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/dm/dm_table.hpp>

#include <cstdlib>
#include <vector>

using namespace blkcrypt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto lines = dm::parse_dm_table(text);
    if (!lines) return 0;
    uint64_t next = 0;  // what the parser accepted is back to back from 0
    for (const auto& l : *lines) {
        if (l.start != next || l.length == 0) std::abort();
        next += l.length;
    }
    auto reg = fuzz::make_registry();
    dm::DmBuildOptions o;
    o.threads = 1;
    o.open = [](const std::string&, bool) -> Result<std::shared_ptr<BackingStore>> {
        return std::shared_ptr<BackingStore>(std::make_shared<MemoryStore>(64 * 1024));
    };
    auto dev = dm::build_dm_table(*reg, *lines, o);
    if (!dev) return 0;
    if ((*dev)->size() != next * 512) std::abort();
    const uint32_t bs = (*dev)->block_size();
    std::vector<uint8_t> buf(2 * bs);
    (void)dm::read_sync(**dev, 0, Bytes(buf.data(), bs));
    (void)dm::read_sync(**dev, (*dev)->size() - bs, Bytes(buf.data(), bs));
    const uint64_t edge = (*lines)[0].length * 512 / bs * bs;
    if (edge >= bs && edge + bs <= (*dev)->size()) (void)dm::read_sync(**dev, edge - bs, Bytes(buf.data(), 2 * bs));
    if (!(*dev)->read_only()) (void)dm::write_sync(**dev, 0, ConstBytes(buf.data(), bs));
    (*dev)->drain();
    return 0;
}
