// @Public(): routes the session guard lets through without a signed-in user.
import { SetMetadata } from '@nestjs/common';

export const IS_PUBLIC = 'example:public';

export const Public = () => SetMetadata(IS_PUBLIC, true);
