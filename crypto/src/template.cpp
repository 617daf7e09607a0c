#include <blkcrypt/internal/template.hpp>

namespace blkcrypt {

void set_instance_names(AlgInfo& info, std::string_view tmpl,
                        std::initializer_list<const Alg*> spawns) {
    std::string name(tmpl), driver(tmpl);
    name += '(';
    driver += '(';
    bool first = true;
    for (const Alg* s : spawns) {
        if (!first) {
            name += ',';
            driver += ',';
        }
        first = false;
        name += s->info().name;
        driver += s->info().driver;
    }
    name += ')';
    driver += ')';
    info.name = std::move(name);
    info.driver = std::move(driver);
    info.priority = spawns.size() ? (*spawns.begin())->info().priority : 0;
    if (info.module.empty()) info.module = "blkcrypt";
}

Result<std::shared_ptr<const Alg>> grab_spawn(Registry& reg, std::string_view tmpl,
                                              const AlgName& name, AlgType type) {
    auto r = reg.lookup(name.str(), type);
    if (!r) return make_error(r.error().status, std::string(tmpl) + ": " + r.error().message);
    return r;
}

Result<void> check_arg_count(const AlgName& name, std::size_t n) {
    if (name.args().size() == n) return {};
    return make_error(Status::Invalid, "'" + name.str() + "': template '" + name.base() +
                                           "' takes " + std::to_string(n) + " argument" +
                                           (n == 1 ? "" : "s"));
}

namespace {
// "an 8-byte block", "a 16-byte block": for error messages.
std::string block_phrase(std::size_t n) {
    const std::string s = std::to_string(n);
    const bool an = s[0] == '8' || s == "11" || s == "18";
    return (an ? "an " : "a ") + s + "-byte block";
}
}  // namespace

Result<AlgInfo> cipher_mode_info(const CipherMode& mode, AlgType type, const AlgInfo& c) {
    if (c.type != AlgType::Cipher)  // a plugin's driver may say otherwise
        return make_error(Status::Invalid, std::string(mode.name) + ": '" + c.name + "' is not a block cipher");
    if (c.blocksize < mode.min_block || c.blocksize > mode.max_block || c.blocksize % mode.block_step)
        return make_error(Status::Invalid, std::string(mode.name) + ": cipher '" + c.name + "' has " +
                                               block_phrase(c.blocksize) + "; " + std::string(mode.accepted));
    AlgInfo info;
    info.name = std::string(mode.name) + "(" + c.name + ")";
    info.driver = std::string(mode.name) + "(" + c.driver + ")";
    info.priority = c.priority;
    info.type = type;
    info.needs_key = true;
    info.blocksize = c.blocksize;
    info.min_keysize = c.min_keysize;
    info.max_keysize = c.max_keysize;
    if (type == AlgType::Shash) {
        info.digestsize = c.blocksize;  // a MAC of one block
    } else {
        info.chunksize = c.blocksize;
        info.ivsize = c.blocksize;
    }
    if (mode.adjust) mode.adjust(info, c);
    return info;
}

}  // namespace blkcrypt
