// A .BEK startup key file: the external-key parser must accept or refuse any
// bytes without reading past them. The VMK's GUID is taken from the input's
// header (offset 16), so the parser always gets past the GUID check and reads
// the entries; the volume GUID is that of cryptsetup's startup-key image, so
// both a matching and a foreign volume-GUID entry (Windows 11) are reachable.
#include "fuzz_util.hpp"

#include <blkcrypt/bitlk/bitlk.hpp>

#include <cstdio>

using namespace blkcrypt;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    const ConstBytes in(data, size);
    bitlk::Vmk vmk;
    if (size >= 32) {
        // libuuid's text of the GUID at 16: the first three fields little-endian.
        const uint8_t* g = data + 16;
        char s[37];
        std::snprintf(s, sizeof s, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", g[3], g[2],
                      g[1], g[0], g[5], g[4], g[7], g[6], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]);
        vmk.guid = s;
    }
    auto k = bitlk::startup_key(in, vmk, "5a95db04-6ebc-4ba9-99a3-15a87a3d07b2");
    if (k && k->size() > size) std::abort();
    return 0;
}
