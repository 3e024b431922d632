#pragma once
// The JSON of a model's calibrated band (model/output_band.hpp), one writer for every command
// that judges a model's final output with it: accuracy-diff's observed output, the engines
// command's final outputs and bisect's runs of a model (schema: definitions/output_band). Its verdict: SUSPICIOUS when
// some direction is beyond its band (a statistic, never UNEXPECTED), EXPECTED otherwise.
#include <nlohmann/json.hpp>

#include "foldcheck/model/output_band.hpp"
#include "foldcheck/result/verdict.hpp"

namespace foldcheck {

nlohmann::json output_band_json(const OutputBand& b);
// An output's verdict: its bound's, and, when the band was computed, the band's (SUSPICIOUS
// beyond it) — every output judged with a band alike.
Verdict with_band(Verdict bound, const OutputBand& b);

}  // namespace foldcheck
