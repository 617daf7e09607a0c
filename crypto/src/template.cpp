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

}  // namespace blkcrypt
