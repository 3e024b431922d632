// A suite report and a comparison of two read from JSON (views/report.hpp).
#include "foldcheck/result/views/report.hpp"

#include "foldcheck/result/views/json_io.hpp"

namespace foldcheck::result::views {

using json = nlohmann::json;

ResultEnvelope ResultEnvelope::from_json(const json& j) {
  if (!j.is_object()) return {};
  return {optional<std::string>(j, "command").value_or(""), optional<std::string>(j, "version").value_or(""),
          optional<std::int64_t>(j, "schema_version").value_or(0)};
}

SuiteInfo SuiteInfo::from_json(const json& j) {
  SuiteInfo s;
  s.name = required<std::string>(j, "name");
  s.description = optional<std::string>(j, "description").value_or("");
  s.single_command = optional<std::string>(j, "single_command");
  s.shard_count = optional<unsigned>(j, "shard_count");
  if (auto it = j.find("shards"); it != j.end()) s.shards = *it;
  return s;
}

ReportEntry ReportEntry::from_json(const json& j) {
  ReportEntry e;
  e.name = required<std::string>(j, "name");
  e.kind = required<std::string>(j, "kind");
  e.expect = required_verdict(j, "expect");
  e.passed = optional<bool>(j, "passed");
  e.source = optional<std::string>(j, "source");
  e.summary = Summary::from_json(j.at("summary"));
  return e;
}

Report Report::from_json(const json& j) {
  Report r;
  r.version = optional<std::string>(j, "version").value_or("");
  r.schema_version = optional<std::int64_t>(j, "schema_version").value_or(0);
  r.suite = SuiteInfo::from_json(j.at("suite"));
  r.entries = list_of(j, "entries", ReportEntry::from_json);
  if (const json* t = object_at(j, "timing"))
    r.seconds = optional<std::map<std::string, double>>(*t, "entries").value_or(std::map<std::string, double>{});
  return r;
}

Change Change::from_json(const json& j) {
  return {required<std::string>(j, "where"), required<std::string>(j, "statistic"), j.at("baseline"), j.at("current"),
          required<bool>(j, "regression")};
}

json Change::to_json() const {
  return {{"where", where},
          {"statistic", statistic},
          {"baseline", baseline},
          {"current", current},
          {"regression", regression}};
}

EntryDiff EntryDiff::from_json(const json& j) {
  return {required<std::string>(j, "name"), required<std::string>(j, "status"),
          list_of(j, "changes", Change::from_json)};
}

json EntryDiff::to_json() const {
  json cs = json::array();
  for (const Change& c : changes) cs.push_back(c.to_json());
  return {{"name", name}, {"status", status}, {"changes", cs}};
}

CompareTolerance CompareTolerance::from_json(const json& j) {
  return {required<double>(j, "relative"), required<double>(j, "ulp_floor"), required<double>(j, "ppm_floor"),
          required<double>(j, "ratio_floor"), required<double>(j, "share_change")};
}

json CompareTolerance::to_json() const {
  return {{"relative", relative},
          {"ulp_floor", ulp_floor},
          {"ppm_floor", ppm_floor},
          {"ratio_floor", ratio_floor},
          {"share_change", share_change}};
}

ReportDiff ReportDiff::from_json(const json& j) {
  return {CompareTolerance::from_json(j.at("tolerance")), list_of(j, "entries", EntryDiff::from_json),
          required_count(j, "regressions"), required_count(j, "changes"), required_verdict(j, "verdict")};
}

json ReportDiff::to_json() const {
  json es = json::array();
  for (const EntryDiff& e : entries) es.push_back(e.to_json());
  return {{"command", "compare"}, {"tolerance", tolerance.to_json()}, {"entries", es}, {"regressions", regressions},
          {"changes", changes},   {"verdict", name(verdict)}};
}

}  // namespace foldcheck::result::views
