// open_container IMAGE KEYFILE OFFSET LENGTH: detect what IMAGE is (LUKS1,
// LUKS2, BitLocker, FileVault 2), unlock it with the passphrase in KEYFILE
// (the whole file, as `cryptsetup --key-file` reads it), and write LENGTH
// bytes of its plaintext from byte OFFSET to stdout. The container API ends
// in a dm table, the table `cryptsetup open` would load; dm::build_dm_table
// makes the device, read here synchronously.
#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/containers/container.hpp>
#include <blkcrypt/dm/dm_table.hpp>
#include <blkcrypt/registry.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace blkcrypt;

namespace {

int fail(const std::string& what) {
    std::fprintf(stderr, "open_container: %s\n", what.c_str());
    return 1;
}

bool number(const char* s, uint64_t& v) {
    char* end = nullptr;
    errno = 0;
    v = std::strtoull(s, &end, 10);
    return *s && *s != '-' && !*end && errno == 0;
}

}  // namespace

int main(int argc, char** argv) {
    uint64_t offset = 0, length = 0;
    if (argc != 5 || !number(argv[3], offset) || !number(argv[4], length)) {
        std::fprintf(stderr, "usage: open_container IMAGE KEYFILE OFFSET LENGTH\n");
        return 2;
    }
    const std::string image = argv[1];
    Registry reg;
    if (auto r = register_defaults(reg); !r) return fail(r.error().message);

    std::ifstream kf(argv[2], std::ios::binary);
    if (!kf) return fail(std::string("cannot read ") + argv[2]);
    const std::vector<char> raw((std::istreambuf_iterator<char>(kf)), std::istreambuf_iterator<char>());
    SecureBuffer passphrase(raw.size());
    std::copy(raw.begin(), raw.end(), passphrase.data());

    auto opened = containers::open(reg, image);
    if (!opened) return fail(opened.error().message);
    std::fprintf(stderr, "%s: %s\n", image.c_str(), std::string(containers::format_name((*opened)->format())).c_str());
    auto table = (*opened)->unlock(passphrase);
    if (!table) return fail(table.error().message);

    // The table names the image; open it read-only for every line.
    dm::DmBuildOptions o;
    o.read_only = true;
    o.open = [](const std::string& path, bool) { return open_file_store(path, false); };
    // LUKS2 --integrity stacks its table on a dm-integrity one; the others have none below.
    std::vector<dm::NamedDmTable> stack = (*opened)->lower_tables();
    stack.push_back({"top", std::move(table).value()});
    auto dev = dm::build_dm_stack(reg, stack, o);
    if (!dev) return fail(dev.error().message);
    if (offset > (*dev)->size() || length > (*dev)->size() - offset)
        return fail("the plaintext is " + std::to_string((*dev)->size()) + " bytes");

    // Whole blocks around the range, then the range itself.
    const uint64_t bs = (*dev)->block_size();
    std::vector<uint8_t> buf(1 << 20);
    for (uint64_t at = offset / bs * bs; at < offset + length;) {
        const uint64_t n = std::min<uint64_t>(buf.size(), (offset + length - at + bs - 1) / bs * bs);
        if (Status s = dm::read_sync(**dev, at, Bytes(buf.data(), n)); s != Status::Ok)
            return fail("reading at byte " + std::to_string(at) + ": " + to_string(s));
        const uint64_t from = std::max(at, offset), to = std::min(at + n, offset + length);
        if (std::fwrite(buf.data() + (from - at), 1, to - from, stdout) != to - from) return fail("writing stdout");
        at += n;
    }
    return std::fflush(stdout) == 0 ? 0 : fail("writing stdout");
}
