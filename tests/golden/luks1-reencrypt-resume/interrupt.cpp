// Starts a LUKS1 re-key of IMAGE with blkcrypt's library and stops it after
// BLOCKS blocks of 64 KiB, leaving the legacy files in the working directory.
#include <blkcrypt/luks/reencrypt_luks1.hpp>
#include <blkcrypt/registry.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
using namespace blkcrypt;
int main(int argc, char** argv) {
    if (argc != 4) return 2;
    Registry reg;
    if (!register_defaults(reg)) return 1;
    auto store = open_file_store(argv[1], true);
    if (!store) { std::fprintf(stderr, "%s\n", store.error().message.c_str()); return 1; }
    const std::string pass = argv[2];
    const unsigned long stop_after = std::strtoul(argv[3], nullptr, 10);
    luks::luks1::legacy::ReencryptParams p;
    p.force_iterations = 1000;
    luks::luks1::legacy::RunOptions ro;
    ro.block_size = 64 * 1024;
    unsigned long n = 0;
    ro.progress = [&](uint64_t, uint64_t) { return ++n < stop_after; };
    auto r = luks::luks1::legacy::reencrypt(reg, **store, ConstBytes(reinterpret_cast<const uint8_t*>(pass.data()), pass.size()), p, ro);
    std::fprintf(stderr, "%s\n", r ? "finished" : r.error().message.c_str());
    return r ? 0 : 3;
}
