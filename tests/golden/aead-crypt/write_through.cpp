// Writes a pattern through blkcrypt's dm-crypt integrity engine over its
// dm-integrity target, into a LUKS2 --integrity image the kernel recorded
// (tests/golden/luks2-integrity), from the .info's two tables; prints the
// pattern. record.sh builds it against build/ and has the kernel read it back.
//   write_through IMG INFO OFFSET LENGTH SEED > pattern
#include <blkcrypt/dm/aead_target.hpp>
#include <blkcrypt/integrity/device.hpp>
#include <blkcrypt/registry.hpp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
using namespace blkcrypt;
int main(int argc, char** argv) {
    // argv: img info off len seed
    Registry reg;
    if (!register_defaults(reg)) return 9;
    std::ifstream f(argv[2]);
    std::string line, tc, td;
    while (std::getline(f, line)) {
        if (line.rfind("table_crypt=", 0) == 0) tc = line.substr(12);
        if (line.rfind("table_dif=", 0) == 0) td = line.substr(10);
    }
    std::istringstream ds(td);
    std::vector<std::string> w;
    for (std::string x; ds >> x;) w.push_back(x);
    auto store = open_file_store(argv[1], true);
    if (!store) { std::puts(store.error().message.c_str()); return 1; }
    integrity::OpenOptions o;
    o.start = std::stoull(w[4]);
    auto it = integrity::IntegrityTarget::open(reg, *store, nullptr, o);
    if (!it) { std::puts(it.error().message.c_str()); return 2; }
    auto t = dm::parse_table_line(tc);
    if (!t) { std::puts(t.error().message.c_str()); return 3; }
    auto d = dm::make_aead_crypt_device(reg, *t, *it, 0, {});
    if (!d) { std::puts(d.error().message.c_str()); return 4; }
    uint64_t off = std::stoull(argv[3]), len = std::stoull(argv[4]);
    std::vector<uint8_t> buf(len);
    for (size_t i = 0; i < len; ++i) buf[i] = static_cast<uint8_t>((i * 131 + atoi(argv[5]) + i / 4096) & 0xff);
    if (dm::write_sync(**d, off, ConstBytes(buf.data(), len)) != Status::Ok) return 5;
    if ((*d)->flush() != Status::Ok) return 6;
    d->reset();
    if (auto r = (*it)->close(); !r) return 7;
    std::fwrite(buf.data(), 1, len, stdout);
    return 0;
}
