// BitLocker metadata: the input is a boot sector (512 bytes) followed by the
// first FVE metadata block. Both parsers and the block's CRC32 check must
// refuse or accept without reading past their input; an accepted block is
// dumped, its dm table computed over a device of a size taken from the
// input, the clear key (if any) tried, its keyed table written, read back
// and built over a small device, and the bytes after the boot sector read
// as a .BEK file for every VMK. Passphrase unlocking is left out: 2^20
// SHA-256 rounds per try.
#include "fuzz_util.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/bitlk/bitlk.hpp>

#include <algorithm>
#include <cstring>

using namespace blkcrypt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const ConstBytes in(data, size);
    bitlk::Metadata md;
    const ConstBytes boot = in.first(std::min<std::size_t>(size, bitlk::kBootSectorSize));
    (void)bitlk::parse_boot_sector(boot, md);
    if (size <= bitlk::kBootSectorSize) return 0;
    const ConstBytes block = in.subspan(bitlk::kBootSectorSize);
    auto reg = fuzz::make_registry();
    (void)bitlk::check_fve_crc(*reg, block);
    if (!bitlk::parse_fve_block(block, md)) return 0;
    (void)bitlk::dump(md, "fuzz");
    const uint64_t device_sectors = md.volume_size / 512 % (1ull << 40);
    auto table = bitlk::dm_table(md, {}, device_sectors, "dev");
    if (table) {
        // Contiguous from 0 to the end, no empty line; what a crypt or
        // linear (paused volume) line reads lies on the device.
        uint64_t at = 0;
        for (const auto& l : *table) {
            if (l.start != at || l.length == 0) std::abort();
            const uint64_t from = l.crypt ? l.crypt->offset : l.offset;
            if (l.target != "zero" && from + l.length > device_sectors) std::abort();
            at += l.length;
        }
        if (at != device_sectors) std::abort();
    }
    auto u = bitlk::unlock_clear_key(*reg, md);
    if (u && u->key.size() * 8 != md.key_bits) std::abort();
    for (const bitlk::Vmk& v : md.vmks) (void)bitlk::startup_key(block, v, md.guid);
    // A small device with the parsed layout: the table's device must build or refuse.
    if (u && device_sectors && device_sectors <= 8192) {
        auto dev = std::make_shared<MemoryStore>(device_sectors * 512);
        auto keyed = bitlk::dm_table(md, u->key, device_sectors, "dev");
        if (keyed) {
            // The table file reads back as the same lines.
            auto back = dm::parse_dm_table(dm::format_dm_table(*keyed, true));
            if (!back || back->size() != keyed->size()) std::abort();
            dm::DmBuildOptions o;
            o.read_only = true;
            o.threads = 1;
            o.open = [&](const std::string&, bool) -> Result<std::shared_ptr<BackingStore>> {
                return std::shared_ptr<BackingStore>(dev);
            };
            auto view = dm::build_dm_table(*reg, *keyed, o);
            if (view) {
                std::vector<uint8_t> buf(std::min<uint64_t>((*view)->size(), 65536) / 4096 * 4096);
                if (!buf.empty()) (void)dm::read_sync(**view, 0, Bytes(buf.data(), buf.size()));
            }
        }
    }
    return 0;
}
