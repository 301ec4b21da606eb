#pragma once
// The family descriptions, one per generator file (see each file for its source).
#include "plait/schedule/schedule_family.h"

namespace plait::schedule {

ScheduleFamily gpipe_family();                  // gpipe.cpp
ScheduleFamily one_f_one_b_family();            // one_f_one_b.cpp
ScheduleFamily interleaved_family();            // interleaved.cpp
ScheduleFamily seq1f1b_family();                // seq1f1b.cpp
ScheduleFamily seq1f1b_interleaved_family();    // seq1f1b_interleaved.cpp
ScheduleFamily zb_h1_family();                  // zb_h1.cpp
ScheduleFamily zb_v_family();                   // zb_v.cpp
ScheduleFamily seq1f1b_zb_family();             // seq1f1b_zb.cpp
ScheduleFamily looped_bfs_family();             // looped_bfs.cpp
ScheduleFamily interleaved_zb_family();         // interleaved_zb.cpp
ScheduleFamily dualpipe_v_family();             // dualpipe_v.cpp
ScheduleFamily v_min_family();                  // v_min.cpp
ScheduleFamily v_half_family();                 // v_half.cpp
ScheduleFamily v_zb_family();                   // v_zb.cpp

}  // namespace plait::schedule
