/* Prints the V4L2 ioctl request numbers that fusiond's capture path issues
 * (through the v4l crate), as the target's own C headers define them.
 * A request number encodes the size of its argument struct, so equal
 * numbers mean bindgen laid the structs out as the target's C compiler
 * does: the unit test `ioctl_numbers_match_the_target_c_headers` in
 * src/capture/v4l2.rs compares them. Build it with the target's compiler
 * and run it on the target (tests/cross/run.sh does so under qemu). */
#include <linux/videodev2.h>
#include <stdio.h>

#define P(request) printf("%s %lu\n", #request, (unsigned long)(request))

int main(void)
{
    P(VIDIOC_QUERYCAP);
    P(VIDIOC_ENUM_FMT);
    P(VIDIOC_G_FMT);
    P(VIDIOC_S_FMT);
    P(VIDIOC_REQBUFS);
    P(VIDIOC_QUERYBUF);
    P(VIDIOC_QBUF);
    P(VIDIOC_DQBUF);
    P(VIDIOC_STREAMON);
    P(VIDIOC_STREAMOFF);
    P(VIDIOC_G_PARM);
    P(VIDIOC_S_PARM);
    P(VIDIOC_ENUM_FRAMESIZES);
    P(VIDIOC_ENUM_FRAMEINTERVALS);
    P(VIDIOC_QUERY_EXT_CTRL);
    P(VIDIOC_QUERYMENU);
    P(VIDIOC_G_EXT_CTRLS);
    P(VIDIOC_S_EXT_CTRLS);
    return 0;
}
